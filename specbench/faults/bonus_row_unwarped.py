"""Sampling-side: after full acceptance the bonus token is drawn from the raw target row (T = 1, no top-k / top-p).

Identical to the correct law at T = 1 without truncation, so a sampled check at only that setting cannot see it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specbench.faults.fault import Fault
from specbench.faults.output_rewrite import rewrite_output_token
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.speculation.capabilities import Proposer


class BonusRowUnwarped(VerifierMutant):
    fault = Fault("bonus-row-unwarped", "after full acceptance the bonus token is sampled at T=1 without top-k/top-p",
                  "", "sampling", Proposer)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def unwarped(target_logits, st, r, first_row, num_draft, num_accepted):
            if num_draft == 0 or num_accepted < num_draft or bool(st.is_greedy[r]):
                return None
            probs = target_logits[first_row + num_draft].float().softmax(-1)
            return torch.multinomial(probs, 1, generator=st.generators[r])[0]

        return rewrite_output_token(verify_fn, unwarped)
