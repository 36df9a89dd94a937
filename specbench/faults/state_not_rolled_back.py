"""A hybrid target's state slots take the state after the last *drafted* position, rejected drafts included:
no rollback (tpu-inference #3178; rMLX #436, where it inflated every recorded acceptance rate)."""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateNotRolledBack(Mutant):
    fault = Fault("state-not-rolled-back", "a hybrid target's recurrent state keeps the rejected drafts' updates", "",
                  "target", Proposer, caught_by="greedy, state oracle")

    def state_commit_rows(self, part: str, num_accepted: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
        return num_draft_tokens
