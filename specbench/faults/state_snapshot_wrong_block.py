"""A prefix hit on a hybrid target resumes the recurrent state from the snapshot of the wrong block (the one before
the hit's last, where it has one): the attention layers continue after the hit while the Gated DeltaNet layers miss
that block's tokens, as a hit resuming a state keyed by the wrong block would (the class of vLLM #43559: Qwen3.6 +
prefix caching losing accuracy). Inert on hits of one block."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateSnapshotWrongBlock(Mutant):
    fault = Fault("state-snapshot-wrong-block", "a hybrid target's prefix hit restores the previous block's state "
                  "snapshot", "", "target", Proposer, is_plain_hosted=True, caught_by="greedy, state oracle")

    def state_snapshot_block(self, has_snapshot: list[bool]) -> int:
        earlier = [b for b, has in enumerate(has_snapshot[:-1]) if has]
        return earlier[-1] if earlier else len(has_snapshot) - 1
