"""A verify (or plain decode step) enqueued on the device with its one copy to the host, and when the next one may
be launched before that copy is read (overlapped decoding and rounds)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.engine.logprobs import StepLogprobs
from specbench.engine.request import Request
from specbench.engine.scheduler import ScheduledBatch
from specbench.speculation.proposer import DraftProposal


@dataclass(frozen=True)
class VerifyLaunch:
    """A verify enqueued on the device, with its result's one copy to the host."""

    requests: tuple[Request, ...]
    proposal: DraftProposal | None
    num_scheduled_tokens: int
    newest_positions: tuple[int, ...]  # [num_reqs] each request's newest-token position (= num_cached) at launch
    output_token_ids: torch.Tensor  # [num_reqs, k + 1] int64 device: accepted drafts, then the bonus, -1 padded
    num_accepted: torch.Tensor  # [num_reqs] int64 device
    features: torch.Tensor | None  # [num_tokens, feature_dim] device, the target features the proposer asked for
    host_rows: torch.Tensor  # [num_reqs, k + 2] int64 host: output tokens, then the count; valid once `copied`
    copied: torch.cuda.Event | None  # None off CUDA (the copy was synchronous)
    logprobs: StepLogprobs | None = None  # the emitted tokens' target logprobs, when a request asked

    def rows(self) -> tuple[list[list[int]], list[int]]:
        """(output tokens per request, accepted per request), waiting for this verify's copy only."""
        if self.copied is not None:
            self.copied.synchronize()
        rows = self.host_rows.tolist()
        return [row[:-1] for row in rows], [row[-1] for row in rows]


def copy_to_host(values: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event | None]:
    """Start a step's one device->host copy; the event tells when it has landed."""
    if values.device.type != "cuda":
        return values.clone(), None
    host = torch.empty(values.shape, dtype=values.dtype, pin_memory=True)
    host.copy_(values, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    return host, copied


def lookahead_blocker(batch: ScheduledBatch, running: list, waiting, now: float, max_concurrency: int,
                      max_model_len: int, num_steps: int) -> str | None:
    """Why the step after `batch` (k = num_steps drafts per request, 0 = plain) cannot be launched before `batch`
    is read back, or None when it can."""
    if any(r.is_prefilling for r in running):  # chunked prefill: the next step carries its chunk
        return "a prompt chunk is pending"
    if len(batch.requests) != len(running) or any(a is not b for a, b in zip(batch.requests, running)):
        return "the batch changed"
    if len(running) < max_concurrency and any(r.arrival_time <= now for r in waiting):
        return "a waiting request can be admitted"
    for request in batch.requests:
        # `batch` commits up to k + 1 tokens and the step after it as many: neither may end a request by length
        if (request.num_output_tokens + num_steps + 1 >= request.sampling_params.max_tokens
                or request.num_tokens + 2 * num_steps + 1 >= max_model_len):
            return "a request may reach its length limit"
    return None
