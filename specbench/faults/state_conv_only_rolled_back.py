"""A hybrid target rolls its conv state back to the last accepted token but keeps the recurrent state of the last
drafted one: the two halves of a Gated DeltaNet state disagree after every rejection."""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateConvOnlyRolledBack(Mutant):
    fault = Fault("state-conv-only-rolled-back", "a hybrid target rolls back its conv state, not its recurrent state",
                  "", "target", Proposer, caught_by="greedy, state oracle")

    def state_commit_rows(self, part: str, num_accepted: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
        return num_accepted if part == "conv" else num_draft_tokens
