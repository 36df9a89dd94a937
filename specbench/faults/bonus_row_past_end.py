"""Target-side: the bonus token after full acceptance is read one row past the request's rows.

That row is the next request's first; for the batch's last request it does not exist and the verifier raises,
so this mutant is also the selftest's crash inside the engine.
"""

from __future__ import annotations

from collections.abc import Callable

from specbench.faults.fault import Fault
from specbench.faults.output_rewrite import rewrite_output_token
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.speculation.capabilities import Proposer


class BonusRowPastEnd(VerifierMutant):
    fault = Fault("bonus-row-past-end", "the bonus token is read one row past the request's rows (raises for the last)",
                  "", "target", Proposer)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def past_end(target_logits, st, r, first_row, num_draft, num_accepted):
            if num_draft == 0 or num_accepted < num_draft:
                return None
            past = first_row + num_draft + 1
            if past >= target_logits.shape[0]:
                raise IndexError(f"verify row {past} out of range for {target_logits.shape[0]} target rows")
            return target_logits[past].argmax()

        return rewrite_output_token(verify_fn, past_end)
