"""Target-side classic: the recovered/bonus token is taken from the next (or previous) logits row."""

from __future__ import annotations

from collections.abc import Callable

from specbench.faults.fault import Fault
from specbench.faults.output_rewrite import rewrite_output_token
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.speculation.capabilities import Proposer


class BonusFromWrongRow(VerifierMutant):
    fault = Fault("bonus-from-wrong-row", "the recovered/bonus token is taken from the next (or previous) logits row",
                  "", "target", Proposer)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def wrong_row(target_logits, st, r, first_row, num_draft, num_accepted):
            if num_draft == 0:  # plain decoding rounds stay correct: only speculation is mutated
                return None
            wrong = num_accepted + 1 if num_accepted < num_draft else num_accepted - 1
            return target_logits[first_row + wrong].argmax()

        return rewrite_output_token(verify_fn, wrong_row)
