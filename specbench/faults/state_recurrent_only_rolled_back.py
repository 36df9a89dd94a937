"""A hybrid target rolls its recurrent state back to the last accepted token but keeps the conv state of the last
drafted one (the reverse of state-conv-only-rolled-back): the short convolution's window still holds the rejected
drafts' inputs, and the next token mixes them in."""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateRecurrentOnlyRolledBack(Mutant):
    fault = Fault("state-recurrent-only-rolled-back", "a hybrid target rolls back its recurrent state, not its conv "
                  "state", "", "target", Proposer, caught_by="greedy, state oracle")

    def state_commit_rows(self, part: str, num_accepted: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
        return num_accepted if part == "recurrent" else num_draft_tokens
