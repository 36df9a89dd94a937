"""Sampling-side: after full acceptance the bonus token is drawn from (p - q_last)+ instead of p: the mask that
zeroes the draft law at the bonus row is missing, so the last draft row's law stays in the bonus residual.

Greedy output is exact. A bonus batch drafting random tokens barely sees it (each row loses p(d) for a random d,
which nearly cancels over the batch); drafting the bonus row's likeliest token, the rows check does (row_batches.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specbench.faults.fault import ALL_METHODS, Fault, Mutant
from specbench.spec.sampling import logits_to_probs


class BonusResidualKeepsLastDraft(Mutant):
    fault = Fault("bonus-residual-keeps-last-draft", "after full acceptance the bonus token is sampled from "
                  "(p - q_last)+: the last draft row's law is left in the bonus residual", "", "sampling", ALL_METHODS)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            out = result.output_token_ids.clone()  # [num_reqs, max_num_draft + 1]
            first_row = 0
            for r, (n, a) in enumerate(zip(num_draft_tokens.tolist(), result.num_accepted.tolist())):
                if n > 0 and a == n and not bool(st.is_greedy[r]):
                    p = logits_to_probs(target_logits[first_row + n][None].float(), st.temperature[r : r + 1],
                                        st.top_k[r : r + 1], st.top_p[r : r + 1])[0]
                    if draft_probs is None:  # a deterministic draft: a point mass on the proposed token
                        q = torch.zeros_like(p)
                        q[draft_token_ids[r, n - 1]] = 1.0
                    else:
                        q = draft_probs[r, n - 1].to(p.device).float()
                    residual = (p - q).clamp_min(0.0)
                    law = residual if residual.sum() > 0 else p
                    out[r, a] = torch.multinomial(law, 1, generator=st.generators[r])[0]
                first_row += 1 + n
            return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

        return verify
