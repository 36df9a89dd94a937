"""Sampling-side: after full acceptance the bonus token is drawn from the raw target row (T = 1, no top-k / top-p).

Identical to the correct law at T = 1 without truncation, so a sampled check at only that setting cannot see it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specbench.faults.fault import ALL_METHODS, Fault, Mutant


class BonusRowUnwarped(Mutant):
    fault = Fault("bonus-row-unwarped", "after full acceptance the bonus token is sampled at T=1 without top-k/top-p",
                  "", "sampling", ALL_METHODS)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            num_draft = num_draft_tokens.tolist()
            accepted = result.num_accepted.tolist()
            greedy = st.is_greedy.tolist()
            out = result.output_token_ids.clone()
            row = 0
            for r, (n, a) in enumerate(zip(num_draft, accepted)):
                if n > 0 and a == n and not greedy[r]:
                    probs = target_logits[row + n].float().softmax(-1)
                    out[r, a] = torch.multinomial(probs, 1, generator=st.generators[r])[0]
                row += 1 + n
            return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

        return verify
