"""Sampling-side: the draft LM draws its token from the warped draft law q but hands the verifier the raw softmax.

The acceptance ratio then uses the wrong q, so sampled output leaves the target's law whenever T != 1 or top-k /
top-p truncate; greedy output is untouched.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.drafters.draft_model import DraftModelProposer


class DraftProbsUnwarped(Mutant):
    fault = Fault("draft-probs-unwarped", "the draft LM hands the verifier unwarped draft probs (tokens drawn warped)",
                  "", "sampling", DraftModelProposer)

    def install(self, engine) -> None:
        wrap_method(engine.proposer, "_draft_tokens", _unwarped)


def _unwarped(draft_tokens):
    def draft(logits, st):  # logits [n, vocab]
        ids, probs = draft_tokens(logits, st)  # probs: None when every request is greedy
        return ids, None if probs is None else logits.float().softmax(-1)
    return draft
