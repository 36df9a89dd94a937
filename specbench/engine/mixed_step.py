"""One step of chunked prefill (Scheduler.schedule_mixed): the running requests' decode/verify rows and prompt chunks
in one target forward, read back synchronously.

The verifier runs on the verify rows only; each final chunk's last row is sampled for its request's first token;
a non-final chunk yields no token and no draft, only its KV (and its target features and prompt logprobs). The
forward is always eager (path prefill.chunked_mixed; no CUDA graph holds ragged chunk segments), never overlapped:
a pending chunk blocks look-ahead (engine/verify_launch.py lookahead_blocker), so plain decode steps and rounds
drafted ahead resume once every prompt is in.
"""

from __future__ import annotations

import torch

from specbench.engine.chunk_inputs import build_mixed_input
from specbench.engine.state_attach import commit_states, with_state_rows
from specbench.engine.logprobs import (StepLogprobs, chunk_prompt_logprobs_of, logprob_table, raw_logprobs,
                                       verify_rows, wanted_top)
from specbench.engine.request import Request
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.step_runner import StepResult, StepRunner
from specbench.engine.timing import PhaseTimer
from specbench.device_copy import to_device
from specbench.speculation.sampling import build_sampling_tensors, sample


def run_mixed_step(runner: StepRunner, batch: ScheduledBatch, timer: PhaseTimer, *,
                   needs_features: bool) -> tuple[tuple[Request, ...], StepResult]:
    """(the requests the step emits tokens for: the verified ones, then those whose final chunk ran; its result).
    `needs_features`: the proposer consumes target features (every row's are handed over here)."""
    requests, chunks = batch.requests, batch.chunks
    if requests and chunks:
        runner.paths.record("prefill.chunked_mixed")
    if any(not c.is_final for c in chunks):
        runner.paths.record("prefill.chunk_partial")
    st = runner.sampling_tensors(requests)
    proposal = runner.propose(batch, st, timer) if requests else None
    inp, chunk_rows = build_mixed_input(requests, proposal, chunks, runner.block_size, runner.device, runner.hooks)
    inp = with_state_rows(inp, runner.states, [r.request_id for r in requests] +
                          [c.request.request_id for c in chunks], len(requests), runner.paths,
                          runner.hooks)
    timer.start("target")
    out = runner.target_runner.mixed(inp)
    timer.stop("target")
    finals = tuple(c.request for c in chunks if c.is_final)
    num_verify = inp.num_verify_rows
    timer.start("sample")
    logits = out.logits
    is_constrained = runner.is_constrained(requests + finals)
    if is_constrained:  # the verify rows (drafts walked), then each final chunk's one row
        draft_rows = runner.draft_rows(proposal, len(requests)) + [[] for _ in finals]
        logits = runner.grammar.masked_logits(out.logits[: num_verify + len(finals)], requests + finals, draft_rows)
    verified = runner.run_verifier(logits[:num_verify], inp, proposal, st) if requests else None
    if verified is not None:
        commit_states(runner.states, inp.md, verified.num_accepted, runner.paths, runner.hooks)
    first_tokens = None
    if finals:
        first_st = build_sampling_tensors([r.sampling_params for r in finals], [r.generator for r in finals],
                                          runner.vocab_size, runner.device)
        first_tokens = sample(logits[num_verify:], first_st)  # [num_finals]
    timer.stop("sample")
    emitting = requests + finals
    logprobs = _step_logprobs(runner, out.logits, inp, verified, first_tokens, emitting)
    if out.prompt_logits is not None:
        chunk_prompt_logprobs_of(out.prompt_logits, chunk_rows.prompt_targets, chunk_rows.prompt_spans, chunks)
    # Read back now: a mixed step is synchronous (verified rows and first tokens, each one small copy).
    rows = [] if verified is None else torch.cat([verified.output_token_ids, verified.num_accepted[:, None]],
                                                 dim=1).tolist()
    committed: list[list[int]] = []
    num_drafts = proposal.num_draft_tokens if proposal is not None else (0,) * len(requests)
    offset = 0
    for r, request in enumerate(requests):
        accepted = rows[r][-1]
        num_new = accepted + 1
        if needs_features:
            runner.proposer.add_target_features(request.request_id, request.num_cached_tokens,
                                                out.features[offset : offset + num_new])
        offset += 1 + num_drafts[r]
        request.num_cached_tokens += num_new
        request.stats.record_round(num_drafts[r], accepted)
        committed.append(rows[r][:num_new])
    if proposal is not None:
        runner.proposer.on_verified(tuple(r.request_id for r in requests), tuple(row[-1] for row in rows))
    for chunk, first in zip(chunks, chunk_rows.first_rows):
        request = chunk.request
        if needs_features:  # the chunk's own rows, at its own start: the proposer appends them in order
            start = runner.hooks.chunk_feature_start(request.request_id, chunk.start)
            features = out.features[first : first + chunk.num_tokens]
            runner.proposer.add_target_features(request.request_id, start, features)
        request.num_cached_tokens = chunk.end
    committed.extend([[t] for t in ([] if first_tokens is None else first_tokens.tolist())])
    if is_constrained:
        runner.grammar.settle(emitting, [row[-1] for row in rows] + [0] * len(finals), committed)
    num_accepted = sum(row[-1] for row in rows)
    return emitting, StepResult(committed, sum(num_drafts), num_accepted, inp.md.num_tokens, logprobs)


def _step_logprobs(runner: StepRunner, logits: torch.Tensor, inp, verified, first_tokens: torch.Tensor | None,
                   emitting: tuple[Request, ...]) -> StepLogprobs | None:
    """The emitted tokens' logprobs when a request asked: the verify rows as launch_verify reads them, then each
    final chunk's sampled row."""
    num_top = wanted_top(emitting)
    if all(n is None for n in num_top):
        return None
    max_top = max(n for n in num_top if n is not None)
    row_logprobs: list[torch.Tensor] = []
    tokens: list[torch.Tensor] = []
    first_row: tuple[int, ...] = ()
    num_rows = 0
    if verified is not None:
        num_drafts = inp.num_draft_tokens.tolist()
        gather, first_row = verify_rows(num_drafts, verified.output_token_ids.shape[1])
        tokens.append(verified.output_token_ids.reshape(-1)[to_device(gather, torch.int64, runner.device)])
        rows = runner.hooks.logprob_rows(num_drafts)
        verify_logits = logits[: inp.num_verify_rows]
        row_logprobs.append(raw_logprobs(verify_logits)[: len(gather)] if rows is None
                            else raw_logprobs(verify_logits)[to_device(rows, torch.int64, runner.device)])
        num_rows = len(gather)
    if first_tokens is not None:
        row_logprobs.append(raw_logprobs(logits[inp.num_verify_rows :]))
        tokens.append(first_tokens)
        first_row = (*first_row, *range(num_rows, num_rows + first_tokens.shape[0]))
    table = logprob_table(torch.cat(row_logprobs), torch.cat(tokens), max_top).cpu()
    return StepLogprobs(table, max_top, first_row, num_top)
