"""A hybrid target's state slots take the state one position past the last accepted token: the state after the first
rejected draft, so the slot holds a token the output never got. Where every draft was accepted (and for zero-draft
requests) there is no kept state past the last draft (the bonus token never ran through the layers): the row is
clamped to the last one, and the mutant is inert there; it shows in rounds with a rejection."""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import Proposer


class StateRolledBackTooShort(Mutant):
    fault = Fault("state-rolled-back-too-short", "a hybrid target's recurrent state keeps one rejected draft (the "
                  "first)", "", "target", Proposer, caught_by="greedy, state oracle")

    def state_commit_rows(self, part: str, num_accepted: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
        return torch.minimum(num_accepted + 1, num_draft_tokens)
