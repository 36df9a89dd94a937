"""Sampling-side: the draft LM draws its token from the warped draft law q but hands the verifier the raw softmax.

The acceptance ratio then uses the wrong q, so sampled output leaves the target's law whenever T != 1 or top-k /
top-p truncate; greedy output is untouched.
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.drafters.draft_model import DraftModelProposer


class DraftProbsUnwarped(Mutant):
    fault = Fault("draft-probs-unwarped", "the draft LM hands the verifier unwarped draft probs (tokens drawn warped)",
                  "", "sampling", DraftModelProposer)

    def draft_probs(self, logits: torch.Tensor, probs: torch.Tensor | None) -> torch.Tensor | None:
        return None if probs is None else logits.float().softmax(-1)  # logits [n, vocab]
