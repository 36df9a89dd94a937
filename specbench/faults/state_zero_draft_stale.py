"""A hybrid target commits states only for requests that drafted: a zero-draft request in the batch keeps the
previous round's state although its newest token ran (vLLM PR #52942: zero-draft rows read stale recurrent state)."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateZeroDraftStale(Mutant):
    fault = Fault("state-zero-draft-stale", "a hybrid target's zero-draft requests keep the previous round's state",
                  "", "target", Proposer, is_plain_hosted=True, caught_by="greedy, state oracle")

    def state_commit_requests(self, num_draft_tokens: list[int]) -> list[bool]:
        return [n > 0 for n in num_draft_tokens]
