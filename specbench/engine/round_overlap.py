"""Overlapped speculative rounds: round N + 1 is drafted on the device before the host reads verify N.

After verify N is enqueued, the proposer builds round N + 1's catch-up from verify N's outputs still on the device
(tokens, accepted counts, target features) and enqueues the whole drafting round (EagleProposer.propose_ahead).
The host then waits only for verify N's one copy, which lands before that draft round runs: while the GPU
drafts, the host commits verify N's tokens, builds verify N + 1's input around the drafts already on the
device, and enqueues it. Only the verify's host-side work stays between rounds, and it runs during the draft.

A round is drafted ahead only for a steady batch (verify_launch.lookahead_blocker); otherwise the round
is read back at once, as the synchronous loop does. A request that verify N finishes (EOS or a stop string)
has a drafted row already: it is dropped with the request. The proposer keeps nothing pending meanwhile: the
catch-up consumed the features on the device, and confirm_ahead commits it when the host has the counts (with
the debug invariants on, it also rebuilds the round the reference way and compares).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from specbench.engine.outputs import RequestOutput
from specbench.engine.request import RequestStatus
from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.timing import PhaseTimer
from specbench.engine.verify_launch import VerifyLaunch, lookahead_blocker
from specbench.speculation.capabilities import DraftsAhead
from specbench.speculation.proposer import DraftProposal, ProposeInput


@dataclass(frozen=True)
class InflightRound:
    """A verify not read back yet, and the next round's drafts enqueued from its device outputs."""

    verify: VerifyLaunch
    ahead_draft_ids: torch.Tensor  # [num_reqs, k] int64 device: the next round's drafts
    timer: PhaseTimer  # the verify's phases (and its own draft phase when it was proposed synchronously)
    ahead_timer: PhaseTimer  # "draft": the round drafted ahead (reported with the verify that checks it)
    start_time: float
    num_free_blocks: int
    num_preempted: int


class OverlappedRounds:
    """LLMEngine's overlapped speculative rounds (a mixin: it shares the engine's state and commit path)."""

    def _round_ahead(self, batch: ScheduledBatch, launch: VerifyLaunch, timer: PhaseTimer,
                     start: float) -> InflightRound | None:
        """Draft the next round from `launch` on the device, if the batch is steady; None: read it back now."""
        scheduler = self.scheduler
        if not self.async_scheduling or launch.proposal is None or not isinstance(self.proposer, DraftsAhead):
            return None
        k = launch.output_token_ids.shape[1] - 1
        if k < 1 or any(n != k for n in batch.num_draft_tokens):  # a round graph drafts k for every request
            return None
        if lookahead_blocker(batch, scheduler.running, scheduler.waiting, time.perf_counter(),
                             scheduler.max_concurrency, self.stop_checker.max_model_len, k) is not None:
            return None
        # The round drafted ahead writes draft KV up to newest + 2k - 1, the verify after it up to newest + 2k + 1.
        if not scheduler.reserve(batch.requests, [p + 2 * k + 2 for p in launch.newest_positions]):
            return None
        ahead_timer = PhaseTimer(self.device)
        ahead_timer.start("draft")
        draft_ids = self.proposer.propose_ahead(
            tuple(r.request_id for r in batch.requests), launch.newest_positions,
            tuple(tuple(r.block_table) for r in batch.requests), launch.output_token_ids, launch.num_accepted,
            launch.features)
        ahead_timer.stop("draft")
        if draft_ids is None:
            return None
        self.paths.record("eagle.ahead")
        self.paths.record(self._proposer_path)
        return InflightRound(launch, draft_ids, timer, ahead_timer, start, scheduler.block_manager.num_free_blocks,
                             len(batch.preempted))

    def _step_round_overlapped(self) -> list[RequestOutput]:
        previous, self._inflight_round = self._inflight_round, None
        launch = previous.verify
        output_rows, accepted = launch.rows()
        emit_time = time.perf_counter()
        # What each request's tokens are once verified, also for one that a stop condition ends now.
        live = [r for r, request in enumerate(launch.requests) if request.status is RequestStatus.RUNNING]
        self.proposer.confirm_ahead(
            ProposeInput(
                request_ids=tuple(launch.requests[r].request_id for r in live),
                token_ids=tuple((*launch.requests[r].token_ids, *output_rows[r][: accepted[r] + 1]) for r in live),
                num_draft_tokens=tuple(launch.proposal.num_draft_tokens[r] for r in live),
                block_tables=tuple(tuple(launch.requests[r].block_table) for r in live),
                sampling=self._sampling_tensors(launch.requests)),
            launch.features, tuple(accepted[r] for r in live), rows_of_request=tuple(live))
        committed, num_drafted, num_accepted, num_tokens = self._read_verify(launch, output_rows, accepted,
                                                                            is_ahead=True)
        finished = self._commit_all(launch.requests, committed, emit_time, launch.logprobs)
        self._record_step(previous.timer, previous.start_time, emit_time, "decode", len(launch.requests), num_tokens,
                          num_drafted, num_accepted, previous.num_preempted, previous.num_free_blocks,
                          read_time=emit_time, is_overlapped=True)
        rows = [r for r, request in enumerate(launch.requests) if request.status is RequestStatus.RUNNING]
        if rows:
            finished += self._verify_drafted_ahead(previous, rows, emit_time)
        return finished

    def _verify_drafted_ahead(self, previous: InflightRound, rows: list[int], now: float) -> list[RequestOutput]:
        """Verify the round drafted ahead for the requests still running (rows of the previous batch)."""
        requests = tuple(previous.verify.requests[r] for r in rows)
        k = previous.ahead_draft_ids.shape[1]
        batch = self.scheduler.schedule_reserved(requests, k)
        st = self._sampling_tensors(requests)
        index = torch.tensor(rows, dtype=torch.int64).to(self.device, non_blocking=True)
        proposal = DraftProposal(previous.ahead_draft_ids.index_select(0, index), batch.num_draft_tokens, None)
        timer = PhaseTimer(self.device)
        timer.adopt("draft", previous.ahead_timer)
        launch = self._launch_verify(requests, proposal, st, timer)
        inflight = self._round_ahead(batch, launch, timer, now)
        if inflight is not None:
            self._inflight_round = inflight
            return []
        output_rows, accepted = launch.rows()
        committed, num_drafted, num_accepted, num_tokens = self._read_verify(launch, output_rows, accepted,
                                                                            is_ahead=False)
        emit_time = time.perf_counter()
        finished = self._commit_all(requests, committed, emit_time, launch.logprobs)
        self._record_step(timer, now, emit_time, "decode", len(requests), num_tokens, num_drafted, num_accepted, 0,
                          self.scheduler.block_manager.num_free_blocks, read_time=emit_time, is_overlapped=True)
        return finished
