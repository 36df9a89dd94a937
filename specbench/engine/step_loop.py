"""The step loop as one flow: the scheduler decides, the step runner executes, the committer commits; the step or
round launched and not read back yet is a value handed from one step to the next (engine/inflight.py):

    finished, inflight = loop.step(inflight, is_async=...)

With look-ahead off (or a batch that is not steady) every step is read back before it returns and `inflight` stays
None: the synchronous loop is the same pieces without look-ahead."""

from __future__ import annotations

import time

import torch

from specbench.device_copy import to_device
from specbench.engine.commit import Committer
from specbench.engine.inflight import Inflight, InflightDecode, InflightRound
from specbench.engine.mixed_step import run_mixed_step
from specbench.engine.outputs import RequestOutput
from specbench.engine.request import RequestStatus
from specbench.engine.scheduler import ScheduledBatch, Scheduler
from specbench.engine.step_log import StepLog
from specbench.engine.step_runner import StepRunner
from specbench.engine.timing import PhaseTimer
from specbench.engine.tree_round import is_tree_round, round_plan, run_tree_round
from specbench.engine.verify_launch import VerifyLaunch, lookahead_blocker
from specbench.execution_paths import PathRecorder
from specbench.speculation.capabilities import ConsumesTargetFeatures, DraftsAhead
from specbench.speculation.proposer import DraftProposal


class StepLoop:
    def __init__(self, scheduler: Scheduler, runner: StepRunner, committer: Committer, log: StepLog,
                 paths: PathRecorder, device: torch.device) -> None:
        self.scheduler = scheduler
        self.runner = runner
        self.committer = committer
        self.log = log
        self.paths = paths
        self.device = device

    @property
    def needs_features(self) -> bool:
        return isinstance(self.runner.proposer, ConsumesTargetFeatures) and self.scheduler.num_steps > 0

    def step(self, last: Inflight | None, *, is_async: bool) -> tuple[list[RequestOutput], Inflight | None]:
        """Run one engine step: (requests that finished in it, the step or round it launched and left for the next
        call to read back, or None). `last`: what the previous call left. `is_async`: launch a plain decode step,
        or draft the next round, before reading the current one back when the batch is steady."""
        if isinstance(last, InflightDecode):
            return self._step_after_decode(last)
        if isinstance(last, InflightRound):
            return self._step_after_round(last, is_async)
        start = time.perf_counter()
        batch = self.scheduler.schedule(start)
        if batch is None:
            return [], None
        self._on_scheduled(batch, start)
        if batch.chunks:
            return self._step_mixed(batch, start), None
        if self._is_overlappable(batch, is_async):
            return [], self._launch_plain_decode(batch, start, None)
        timer = PhaseTimer(self.device)
        st = self.runner.sampling_tensors(batch.requests)
        if batch.is_prefill:
            result = self.runner.prefill(batch.requests, st, timer, needs_features=self.needs_features)
        elif is_tree_round(self.scheduler.draft_shape, self.runner.proposer, batch):  # synchronous, eager
            plan = round_plan(self.scheduler.draft_shape, self.scheduler.num_steps, self.scheduler.max_model_len,
                              batch.requests)
            result = run_tree_round(self.runner, batch, st, timer, plan, needs_features=self.needs_features)
        else:
            proposal = self.runner.propose(batch, st, timer)
            launch = self.runner.launch_verify(batch.requests, proposal, st, timer)
            inflight = self._round_ahead(batch, launch, timer, start, is_async)
            if inflight is not None:
                return [], inflight
            self.paths.record("decode.sync" if proposal is None else "spec.sync_round")
            output_rows, accepted = launch.rows()
            result = self.runner.read_verify(launch, output_rows, accepted, hands_features=self.needs_features)
        emit_time = time.perf_counter()
        finished = self.committer.commit_all(batch.requests, result.committed, emit_time, result.logprobs)
        self.log.record(timer, start=start, end=time.perf_counter(),
                        phase="prefill" if batch.is_prefill else "decode", num_reqs=len(batch.requests),
                        num_tokens=result.num_scheduled_tokens, num_drafted=result.num_drafted,
                        num_accepted=result.num_accepted, num_preempted=len(batch.preempted),
                        num_free_blocks=self.scheduler.block_manager.num_free_blocks, read_time=emit_time,
                        num_prefix_queried=batch.num_prefix_queried_tokens, num_prefix_hit=batch.num_prefix_hit_tokens)
        return finished, None

    def _on_scheduled(self, batch: ScheduledBatch, start: float) -> None:
        if batch.preempted:
            self.paths.record("preemption")
        for request in batch.preempted:
            self.runner.free(request.request_id)
        for request in (*batch.requests, *(c.request for c in batch.chunks)):
            if request.stats.first_scheduled_time is None:
                request.stats.first_scheduled_time = start

    def _step_mixed(self, batch: ScheduledBatch, start: float) -> list[RequestOutput]:
        """A step carrying prompt chunks (chunked prefill), read back before the next is scheduled
        (engine/mixed_step.py); only the verified requests and those whose final chunk ran emit tokens."""
        timer = PhaseTimer(self.device)
        emitting, result = run_mixed_step(self.runner, batch, timer, needs_features=self.needs_features)
        emit_time = time.perf_counter()
        finished = self.committer.commit_all(emitting, result.committed, emit_time, result.logprobs)
        self.log.record(timer, start=start, end=time.perf_counter(), phase="mixed" if batch.requests else "prefill",
                        num_reqs=len(batch.requests) + len(batch.chunks), num_tokens=result.num_scheduled_tokens,
                        num_drafted=result.num_drafted, num_accepted=result.num_accepted,
                        num_preempted=len(batch.preempted),
                        num_free_blocks=self.scheduler.block_manager.num_free_blocks, read_time=emit_time,
                        num_prefix_queried=batch.num_prefix_queried_tokens, num_prefix_hit=batch.num_prefix_hit_tokens)
        return finished

    # ---- overlapped plain decoding ---------------------------------------------------------
    def _is_overlappable(self, batch: ScheduledBatch, is_async: bool) -> bool:
        # A draft round needs the previous round's accepted tokens on the host: only plain decode overlaps; a
        # pending prompt chunk keeps the loop synchronous (its request joins the batch once its prompt is in).
        # A constrained request's next mask needs the token in flight on the host: it decodes synchronously.
        return (is_async and not batch.is_prefill and self.scheduler.num_steps == 0
                and not any(r.is_prefilling for r in self.scheduler.running)
                and not self.runner.is_constrained(self.scheduler.running))

    def _step_after_decode(self, previous: InflightDecode) -> tuple[list[RequestOutput], InflightDecode | None]:
        """Launch the step after `previous` if the batch is steady, then read `previous` back."""
        now = time.perf_counter()
        scheduler = self.scheduler
        inflight = None
        blocker = lookahead_blocker(previous.batch, scheduler.running, scheduler.waiting, now,
                                    scheduler.max_concurrency, scheduler.max_model_len, 0)
        if blocker is None:
            batch = scheduler.schedule_lookahead()
            if batch is not None:
                self.paths.record("decode.overlap")
                inflight = self._launch_plain_decode(batch, now, previous.launch.output_token_ids[:, 0])
        return self._read_back(previous), inflight

    def _launch_plain_decode(self, batch: ScheduledBatch, start: float,
                             newest_token_ids: torch.Tensor | None) -> InflightDecode:
        """Enqueue one plain decode step and its token copy; nothing here waits for the device."""
        timer = PhaseTimer(self.device)
        newest_token_ids = self.runner.hooks.plain_decode_launch(batch.requests, newest_token_ids)
        launch = self.runner.launch_verify(batch.requests, None, self.runner.sampling_tensors(batch.requests), timer,
                                           newest_token_ids)
        for request in batch.requests:
            request.num_cached_tokens += 1  # this step writes the newest token's KV; its successor is in flight
        return InflightDecode(batch, launch, timer, start, self.scheduler.block_manager.num_free_blocks)

    def _read_back(self, step: InflightDecode) -> list[RequestOutput]:
        """Commit a launched step's tokens; rows of requests that finished since its launch are discarded."""
        output_rows, _ = step.launch.rows()
        emit_time = time.perf_counter()
        finished = self.committer.commit_all(step.batch.requests, [row[:1] for row in output_rows], emit_time,
                                             step.launch.logprobs)
        num_reqs = len(step.batch.requests)
        self.log.record(step.timer, start=step.start_time, end=emit_time, phase="decode", num_reqs=num_reqs,
                        num_tokens=num_reqs, num_drafted=0, num_accepted=0, num_preempted=len(step.batch.preempted),
                        num_free_blocks=step.num_free_blocks, read_time=emit_time, is_overlapped=True)
        return finished

    # ---- overlapped speculative rounds -----------------------------------------------------
    def _round_ahead(self, batch: ScheduledBatch, launch: VerifyLaunch, timer: PhaseTimer, start: float,
                     is_async: bool) -> InflightRound | None:
        """Draft the next round from `launch` on the device, if the batch is steady; None: read it back now."""
        scheduler = self.scheduler
        if not is_async or launch.proposal is None or not isinstance(self.runner.proposer, DraftsAhead):
            return None
        if self.runner.is_constrained(batch.requests):  # drafts made ahead would skip the grammar's mask walk
            return None
        # A hybrid target reads every round back: a verify launched from a round drafted ahead commits its recurrent
        # states before the host counts the previous round's tokens, so between steps a slot would run a round ahead
        # of its request's committed tokens, which INV-STATE (check/state_oracle.py) cannot tell from a wrong commit.
        if self.runner.states is not None:
            return None
        k = launch.output_token_ids.shape[1] - 1
        if k < 1 or any(n != k for n in batch.num_draft_tokens):  # a round graph drafts k for every request
            return None
        if lookahead_blocker(batch, scheduler.running, scheduler.waiting, time.perf_counter(),
                             scheduler.max_concurrency, scheduler.max_model_len, k) is not None:
            return None
        # The round drafted ahead writes draft KV up to newest + 2k - 1, the verify after it up to newest + 2k + 1.
        if not scheduler.reserve(batch.requests, [p + 2 * k + 2 for p in launch.newest_positions]):
            return None
        drafted = self.runner.draft_ahead(batch, launch)
        if drafted is None:
            return None
        draft_ids, ahead_timer = drafted
        return InflightRound(launch, draft_ids, timer, ahead_timer, start, scheduler.block_manager.num_free_blocks,
                             len(batch.preempted))

    def _step_after_round(self, previous: InflightRound,
                          is_async: bool) -> tuple[list[RequestOutput], InflightRound | None]:
        """Read `previous`'s verify back, then verify the round drafted ahead from it for the requests still
        running (and draft the round after that ahead, if the batch is still steady)."""
        launch = previous.verify
        output_rows, accepted = launch.rows()
        emit_time = time.perf_counter()
        # What each request's tokens are once verified, also for one that a stop condition ends now.
        live = [r for r, request in enumerate(launch.requests) if request.status is RequestStatus.RUNNING]
        self.runner.confirm_ahead(launch, output_rows, accepted, live)
        result = self.runner.read_verify(launch, output_rows, accepted, hands_features=False)
        finished = self.committer.commit_all(launch.requests, result.committed, emit_time, result.logprobs)
        self.log.record(previous.timer, start=previous.start_time, end=emit_time, phase="decode",
                        num_reqs=len(launch.requests), num_tokens=result.num_scheduled_tokens,
                        num_drafted=result.num_drafted, num_accepted=result.num_accepted,
                        num_preempted=previous.num_preempted, num_free_blocks=previous.num_free_blocks,
                        read_time=emit_time, is_overlapped=True)
        rows = [r for r, request in enumerate(launch.requests) if request.status is RequestStatus.RUNNING]
        if not rows:
            return finished, None
        more, inflight = self._verify_drafted_ahead(previous, rows, emit_time, is_async)
        return finished + more, inflight

    def _verify_drafted_ahead(self, previous: InflightRound, rows: list[int], now: float,
                              is_async: bool) -> tuple[list[RequestOutput], InflightRound | None]:
        """Verify the round drafted ahead for the requests still running (rows of the previous batch)."""
        requests = tuple(previous.verify.requests[r] for r in rows)
        k = previous.ahead_draft_ids.shape[1]
        batch = self.scheduler.schedule_reserved(requests, k)
        st = self.runner.sampling_tensors(requests)
        index = to_device(rows, torch.int64, self.device)
        proposal = DraftProposal(previous.ahead_draft_ids.index_select(0, index), batch.num_draft_tokens, None)
        timer = PhaseTimer(self.device)
        timer.adopt("draft", previous.ahead_timer)
        launch = self.runner.launch_verify(requests, proposal, st, timer)
        inflight = self._round_ahead(batch, launch, timer, now, is_async)
        if inflight is not None:
            return [], inflight
        output_rows, accepted = launch.rows()
        result = self.runner.read_verify(launch, output_rows, accepted, hands_features=self.needs_features)
        emit_time = time.perf_counter()
        finished = self.committer.commit_all(requests, result.committed, emit_time, result.logprobs)
        self.log.record(timer, start=now, end=emit_time, phase="decode", num_reqs=len(requests),
                        num_tokens=result.num_scheduled_tokens, num_drafted=result.num_drafted,
                        num_accepted=result.num_accepted, num_preempted=0,
                        num_free_blocks=self.scheduler.block_manager.num_free_blocks, read_time=emit_time,
                        is_overlapped=True)
        return finished, None
