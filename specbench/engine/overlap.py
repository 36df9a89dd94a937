"""Overlapped plain decoding: step N + 1 is launched before the host reads step N's tokens.

While the GPU runs step N, the host schedules step N + 1 and enqueues it with step N's sampled tokens still on
the device as its input; only then does it wait for step N's one device->host copy, commit those tokens and
check stop conditions. The GPU never idles on host work in a steady batch.

What may and may not be guessed (the engine checks these before every lookahead launch, else it drains):
- the batch of step N + 1 is every running request, in order, and no waiting request could be admitted;
- no request reaches max_tokens or max_model_len with step N's token (a length finish is known in advance);
- the KV pool covers every request's next token without preempting.
A request that step N finishes by EOS or a stop string has a row in step N + 1 already: that row's token is
discarded when step N + 1 is read back (its KV write lands in freed blocks before any later owner's, as every
launch is ordered on one stream).

Emission times stay honest: a token is emitted when the host has read it, not when it was launched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from specbench.engine.inputs import build_verify_input
from specbench.engine.outputs import RequestOutput
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.timing import PhaseTimer


@dataclass(frozen=True)
class InflightDecode:
    """A plain decode step on the device whose tokens the host has not read yet."""

    batch: ScheduledBatch
    sampled_token_ids: torch.Tensor  # [num_reqs] int64, device: the next step's input
    host_token_ids: torch.Tensor  # [num_reqs] int64, pinned host copy; valid once `copied` has completed
    copied: torch.cuda.Event | None  # recorded after the copy; None off CUDA (the copy was synchronous)
    timer: PhaseTimer
    start_time: float  # perf_counter when the step was scheduled
    num_free_blocks: int  # after scheduling this step

    def token_ids(self) -> list[int]:
        """Wait for this step's copy only (not for steps launched after it) and return its tokens."""
        if self.copied is not None:
            self.copied.synchronize()
        return self.host_token_ids.tolist()


def copy_to_host(token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event | None]:
    """Start the step's one device->host copy; the event tells when it has landed."""
    if token_ids.device.type != "cuda":
        return token_ids.clone(), None
    host = torch.empty(token_ids.shape, dtype=token_ids.dtype, pin_memory=True)
    host.copy_(token_ids, non_blocking=True)
    copied = torch.cuda.Event()
    copied.record()
    return host, copied


def lookahead_blocker(batch: ScheduledBatch, running: list, waiting, now: float, max_concurrency: int,
                      max_model_len: int) -> str | None:
    """Why step N + 1 cannot be launched before step N (`batch`) is read back, or None when it can."""
    if len(batch.requests) != len(running) or any(a is not b for a, b in zip(batch.requests, running)):
        return "the batch changed"
    if len(running) < max_concurrency and any(r.arrival_time <= now for r in waiting):
        return "a waiting request can be admitted"
    for request in batch.requests:
        # num_tokens counts committed tokens only: step N's token is one more
        if (request.num_output_tokens + 1 >= request.sampling_params.max_tokens
                or request.num_tokens + 1 >= max_model_len):
            return "a request reaches its length limit"
    return None


class OverlappedDecode:
    """LLMEngine's overlapped plain-decode steps (a mixin: it shares the engine's state and commit path)."""

    def _is_overlappable(self, batch: ScheduledBatch) -> bool:
        # A draft round needs the previous round's accepted tokens on the host: only plain decode overlaps.
        return self.async_scheduling and not batch.is_prefill and self.num_steps == 0

    def _step_overlapped(self) -> list[RequestOutput]:
        previous, self._inflight = self._inflight, None
        now = time.perf_counter()
        scheduler = self.scheduler
        blocker = lookahead_blocker(previous.batch, scheduler.running, scheduler.waiting, now,
                                    scheduler.max_concurrency, self.stop_checker.max_model_len)
        if blocker is None:
            batch = scheduler.schedule_lookahead()
            if batch is not None:
                self._inflight = self._launch_plain_decode(batch, now, previous.sampled_token_ids)
        return self._read_back(previous)

    def _launch_plain_decode(self, batch: ScheduledBatch, start: float,
                             newest_token_ids: torch.Tensor | None) -> InflightDecode:
        """Enqueue one plain decode step and its token copy; nothing here waits for the device."""
        timer = PhaseTimer(self.device)
        st = self._sampling_tensors(batch.requests)
        inp = build_verify_input(batch.requests, None, self.block_size, self.device, self.hooks, newest_token_ids)
        timer.start("target")
        out = self.runner.verify(inp)
        timer.stop("target")
        timer.start("sample")
        result = self.verify_fn(out.logits, inp.draft_token_ids, inp.num_draft_tokens, None, st)
        timer.stop("sample")
        sampled = result.output_token_ids[:, 0]
        host_token_ids, copied = copy_to_host(sampled)
        for request in batch.requests:
            request.num_cached_tokens += 1  # this step writes the newest token's KV; its successor is in flight
        return InflightDecode(batch, sampled, host_token_ids, copied, timer, start,
                              self.scheduler.block_manager.num_free_blocks)

    def _read_back(self, step: InflightDecode) -> list[RequestOutput]:
        """Commit a launched step's tokens; rows of requests that finished since its launch are discarded."""
        token_ids = step.token_ids()
        emit_time = time.perf_counter()
        finished = self._commit_all(step.batch.requests, [[token] for token in token_ids], emit_time)
        num_reqs = len(step.batch.requests)
        self._record_step(step.timer, step.start_time, emit_time, "decode", num_reqs, num_reqs, 0, 0,
                          len(step.batch.preempted), step.num_free_blocks, read_time=emit_time, is_overlapped=True)
        return finished
