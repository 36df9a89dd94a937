"""Log-probabilities of emitted and prompt tokens under the target's raw distribution (SamplingParams.logprobs).

Semantics: log_softmax of the target's float32 logits at the row that predicts the token, before temperature /
top-k / top-p. In a verify, request r's rows are its newest token then its drafts; row j predicts output token j of
the round, whatever kind it is (accepted draft j, the recovered token at j = accepted, the bonus at j = k), so the
logprob of a token never depends on how it was proposed. Computed on the device only for batches where a request
asked; read back with the step's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.device_copy import to_device
from specbench.engine.token_logprob import TokenLogprob


def raw_logprobs(logits: torch.Tensor) -> torch.Tensor:
    """[num_rows, vocab] float32: the raw distribution's logprobs (no temperature, top-k or top-p)."""
    return torch.log_softmax(logits.float(), dim=-1)


def logprob_table(logprobs: torch.Tensor, token_ids: torch.Tensor, num_top: int) -> torch.Tensor:
    """[num_rows, 2 + 2 * num_top] float64: each row's chosen-token logprob, its rank, its top-n logprobs, their
    token ids. `logprobs` [num_rows, vocab] (raw_logprobs); `token_ids` [num_rows] int64 (negative: padding, its
    value is not read). float64 holds any token id exactly, so one tensor (one copy) carries ids and values."""
    chosen = logprobs.gather(1, token_ids.clamp(min=0)[:, None])
    rank = (logprobs > chosen).sum(dim=-1, keepdim=True) + 1
    top_values, top_ids = logprobs.topk(num_top, dim=-1) if num_top else (logprobs[:, :0], logprobs[:, :0])
    return torch.cat([chosen.double(), rank.double(), top_values.double(), top_ids.double()], dim=1)


@dataclass(frozen=True)
class StepLogprobs:
    """One step's logprob table on the host, and which of its rows belong to which request."""

    table: torch.Tensor  # [num_rows, 2 + 2 * max_top] float64 host (logprob_table); valid once `copied`
    max_top: int  # the table's top-n width: the largest top-n asked in the batch
    first_row: tuple[int, ...]  # [num_reqs] the row predicting each request's first token of this step
    num_top: tuple[int | None, ...]  # [num_reqs] each request's top-n; None: it did not ask
    copied: torch.cuda.Event | None = None  # None: the copy was synchronous

    def for_request(self, r: int, token_ids: list[int]) -> list[TokenLogprob] | None:
        """The logprobs of request r's tokens of this step (in order), or None when it did not ask."""
        num_top = self.num_top[r]
        if num_top is None:
            return None
        if self.copied is not None:
            self.copied.synchronize()
        first = self.first_row[r]
        rows = self.table[first : first + len(token_ids)].tolist()
        ids_at = 2 + self.max_top
        return [TokenLogprob(token, row[0], int(row[1]),
                             tuple((int(row[ids_at + i]), row[2 + i]) for i in range(num_top)))
                for token, row in zip(token_ids, rows)]


def wanted_top(requests) -> tuple[int | None, ...]:
    """[num_reqs] each request's output top-n, None where it did not ask for logprobs."""
    return tuple(r.sampling_params.logprobs for r in requests)


def verify_rows(num_draft_tokens, width: int) -> tuple[list[int], tuple[int, ...]]:
    """(index into the verify's [num_reqs, width] output tokens of each logits row, each request's first row).
    Request r has 1 + num_draft_tokens[r] rows, in order (the verify's input layout)."""
    gather: list[int] = []
    first_row: list[int] = []
    for r, num in enumerate(num_draft_tokens):
        first_row.append(len(gather))
        gather.extend(range(r * width, r * width + 1 + int(num)))
    return gather, tuple(first_row)


def is_prompt_logprobs_due(request) -> bool:
    return request.sampling_params.prompt_logprobs is not None and request.prompt_logprobs is None


def prompt_rows(requests) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """For a prefill of `requests` (each one's tokens contiguous, in order): (logits rows to compute, the prompt
    token each row predicts, per request (first row into those, count) or (0, 0) where no prompt logprobs are due).
    Due once: at a request's first prefill; a preempted request's re-prefill keeps the ones it has. A request they are
    due for starts with no prefix hit (engine/prefix_reuse.py): its rows start at position 0."""
    rows: list[int] = []
    targets: list[int] = []
    spans: list[tuple[int, int]] = []
    offset = 0
    for request in requests:
        if is_prompt_logprobs_due(request):
            prompt = request.prompt_token_ids
            spans.append((len(rows), len(prompt) - 1))
            rows.extend(range(offset, offset + len(prompt) - 1))  # row p predicts prompt token p + 1
            targets.extend(prompt[1:])
        else:
            spans.append((0, 0))
        offset += request.num_tokens - request.num_cached_tokens  # its prefill rows (a prefix hit's not computed)
    return rows, targets, spans


def prompt_logprobs_of(logits: torch.Tensor, targets: list[int], spans: list[tuple[int, int]], requests) -> None:
    """Set each due request's prompt_logprobs ([num_prompt_tokens], the first None) from the prefill's
    `logits` [num_prompt_rows, vocab] at prompt_rows' rows."""
    max_top = max((r.sampling_params.prompt_logprobs for r in requests if is_prompt_logprobs_due(r)), default=0)
    table = logprob_table(raw_logprobs(logits), to_device(targets, torch.int64, logits.device), max_top).cpu()
    for request, (first, num) in zip(requests, spans):
        if not is_prompt_logprobs_due(request):
            continue
        step = StepLogprobs(table, max_top, (first,), (request.sampling_params.prompt_logprobs,))
        request.prompt_logprobs = (None, *step.for_request(0, request.prompt_token_ids[1:]))


def chunk_prompt_logprobs_of(logits: torch.Tensor, targets: tuple[int, ...], spans, chunks) -> None:
    """Prompt logprobs of one mixed step's chunks (engine/chunk_inputs.py ChunkRows): `logits` [num_prompt_rows,
    vocab] at the chunks' prompt rows, `spans` [num_chunks] (first row, count, first position). Each chunk's are kept
    at their positions in request.partial_prompt_logprobs (a recompute after preemption overwrites the ones it
    has); a request's final chunk sets prompt_logprobs once every prompt position has one, the same values a
    whole-prompt prefill gives."""
    due = [c for c in chunks if is_prompt_logprobs_due(c.request)]
    max_top = max((c.request.sampling_params.prompt_logprobs for c in due), default=0)
    table = logprob_table(raw_logprobs(logits), to_device(list(targets), torch.int64, logits.device), max_top).cpu()
    for chunk, (first, num, start) in zip(chunks, spans):
        request = chunk.request
        if not is_prompt_logprobs_due(request):
            continue
        kept = request.partial_prompt_logprobs
        del kept[start:]  # index i: prompt token i + 1, predicted at position i
        if num and len(kept) == start:  # a prefix-cache hit before `start` left no rows to read
            step = StepLogprobs(table, max_top, (first,), (request.sampling_params.prompt_logprobs,))
            kept.extend(step.for_request(0, list(request.prompt_token_ids[start + 1 : start + 1 + num])))
        if chunk.is_final and len(kept) == len(request.prompt_token_ids) - 1:
            request.prompt_logprobs = (None, *kept)
            request.partial_prompt_logprobs = []
