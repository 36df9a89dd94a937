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

from specbench.engine.outputs import RequestOutput
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.timing import PhaseTimer
from specbench.engine.verify_launch import VerifyLaunch, lookahead_blocker


@dataclass(frozen=True)
class InflightDecode:
    """A plain decode step on the device whose tokens the host has not read yet."""

    batch: ScheduledBatch
    launch: VerifyLaunch  # its output's column 0 is each request's next token, the next step's input
    timer: PhaseTimer
    start_time: float  # perf_counter when the step was scheduled
    num_free_blocks: int  # after scheduling this step


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
                                    scheduler.max_concurrency, self.stop_checker.max_model_len, 0)
        if blocker is None:
            batch = scheduler.schedule_lookahead()
            if batch is not None:
                self.paths.record("decode.overlap")
                self._inflight = self._launch_plain_decode(batch, now, previous.launch.output_token_ids[:, 0])
        return self._read_back(previous)

    def _launch_plain_decode(self, batch: ScheduledBatch, start: float,
                             newest_token_ids: torch.Tensor | None) -> InflightDecode:
        """Enqueue one plain decode step and its token copy; nothing here waits for the device."""
        timer = PhaseTimer(self.device)
        launch = self._launch_verify(batch.requests, None, self._sampling_tensors(batch.requests), timer,
                                     newest_token_ids)
        for request in batch.requests:
            request.num_cached_tokens += 1  # this step writes the newest token's KV; its successor is in flight
        return InflightDecode(batch, launch, timer, start, self.scheduler.block_manager.num_free_blocks)

    def _read_back(self, step: InflightDecode) -> list[RequestOutput]:
        """Commit a launched step's tokens; rows of requests that finished since its launch are discarded."""
        output_rows, _ = step.launch.rows()
        emit_time = time.perf_counter()
        finished = self._commit_all(step.batch.requests, [row[:1] for row in output_rows], emit_time,
                                    step.launch.logprobs)
        num_reqs = len(step.batch.requests)
        self._record_step(step.timer, step.start_time, emit_time, "decode", num_reqs, num_reqs, 0, 0,
                          len(step.batch.preempted), step.num_free_blocks, read_time=emit_time, is_overlapped=True)
        return finished
