"""A step or round launched and not read back yet: the value the step loop (engine/step_loop.py) hands from one
step to the next, as `step(last) -> (outputs, next)`.

Overlapped plain decoding (InflightDecode): step N + 1 is launched before the host reads step N's tokens.

While the GPU runs step N, the host schedules step N + 1 and enqueues it with step N's sampled tokens still on
the device as its input; only then does it wait for step N's one device->host copy, commit those tokens and
check stop conditions. The GPU never idles on host work in a steady batch.

What may and may not be guessed (the step loop checks these before every lookahead launch, else it drains):
- the batch of step N + 1 is every running request, in order, and no waiting request could be admitted;
- no request reaches max_tokens or max_model_len with step N's token (a length finish is known in advance);
- the KV pool covers every request's next token without preempting.
A request that step N finishes by EOS or a stop string has a row in step N + 1 already: that row's token is
discarded when step N + 1 is read back (its KV write lands in freed blocks before any later owner's, as every
launch is ordered on one stream).

Emission times stay honest: a token is emitted when the host has read it, not when it was launched.

Overlapped speculative rounds (InflightRound): round N + 1 is drafted on the device before the host reads verify N.

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

from dataclasses import dataclass

import torch

from specbench.engine.scheduler import ScheduledBatch
from specbench.engine.timing import PhaseTimer
from specbench.engine.verify_launch import VerifyLaunch


@dataclass(frozen=True)
class InflightDecode:
    """A plain decode step on the device whose tokens the host has not read yet."""

    batch: ScheduledBatch
    launch: VerifyLaunch  # its output's column 0 is each request's next token, the next step's input
    timer: PhaseTimer
    start_time: float  # perf_counter when the step was scheduled
    num_free_blocks: int  # after scheduling this step


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


Inflight = InflightDecode | InflightRound  # what a step launched for its successor to read back; None: nothing
