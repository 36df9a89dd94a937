"""A hybrid target's state slots take the state one position before the last accepted token: the rollback goes one
step too far (the newest token's state when nothing was accepted, so only rounds with an acceptance show it)."""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateRolledBackTooFar(Mutant):
    fault = Fault("state-rolled-back-too-far", "a hybrid target's recurrent state rolls back one accepted token too "
                  "many", "", "target", Proposer, caught_by="greedy, state oracle")

    def state_commit_rows(self, part: str, num_accepted: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
        return (num_accepted - 1).clamp(min=0)
