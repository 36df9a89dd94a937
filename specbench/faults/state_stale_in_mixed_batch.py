"""A hybrid target commits a zero-draft request's state only when the whole round drafted nothing: in a batch mixing
zero-draft and drafting requests the zero-draft ones keep the previous round's state (vLLM PR #52942's shape: the
mixed batch's path alone is wrong). One request at a time never mixes, so the gentle gate and a warm cache at
concurrency 1 pass; `specbench stress` fails it at zero-draft-mix-8 (or any concurrent condition that mixes)."""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateStaleInMixedBatch(Mutant):
    fault = Fault("state-stale-in-mixed-batch", "a hybrid target's zero-draft requests keep the previous round's "
                  "state only in rounds where another request drafted", "", "stress", Proposer,
                  caught_by="`specbench stress` (zero-draft-mix-8 on a hybrid target), greedy at concurrency")

    def state_commit_requests(self, num_draft_tokens: list[int]) -> list[bool]:
        if all(n > 0 for n in num_draft_tokens) or not any(n > 0 for n in num_draft_tokens):
            return [True] * len(num_draft_tokens)
        return [n > 0 for n in num_draft_tokens]
