"""Sampling-side: after full acceptance the bonus token is drawn from (p - q_last)+ instead of p: the mask that
zeroes the draft law at the bonus row is missing, so the last draft row's law stays in the bonus residual.

Greedy output is exact. A bonus batch drafting random tokens barely sees it (each row loses p(d) for a random d,
which nearly cancels over the batch); drafting the bonus row's likeliest token, the rows check does (row_batches.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specbench.faults.fault import Fault
from specbench.faults.verifier_mutant import VerifierMutant
from specbench.speculation.capabilities import Proposer
from specbench.speculation.sampling import logits_to_probs, sample_from_probs


class BonusResidualKeepsLastDraft(VerifierMutant):
    fault = Fault("bonus-residual-keeps-last-draft", "after full acceptance the bonus token is sampled from "
                  "(p - q_last)+: the last draft row's law is left in the bonus residual", "", "sampling", Proposer,
                  caught_by="rows (too small a shift for sampled)")

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            device = target_logits.device
            num_draft = num_draft_tokens.to(device)  # [num_reqs]
            accepted = result.num_accepted.to(device)
            is_bonus = (num_draft > 0) & (accepted == num_draft) & ~st.is_greedy.to(device)  # [num_reqs]
            reqs = is_bonus.nonzero()[:, 0]
            if len(reqs) == 0:
                return result
            bonus_rows = (torch.cumsum(num_draft + 1, 0) - 1)[reqs]  # each request's last row: its bonus row
            p = logits_to_probs(target_logits[bonus_rows].float(), st.temperature[reqs], st.top_k[reqs],
                                st.top_p[reqs])  # [num_bonus, V]
            last = num_draft[reqs] - 1
            if draft_probs is None:  # a deterministic draft: a point mass on the proposed token
                q = torch.zeros_like(p).scatter_(1, draft_token_ids.to(device)[reqs, last][:, None], 1.0)
            else:
                q = draft_probs.to(device).float()[reqs, last]
            residual = (p - q).clamp_min(0.0)
            law = torch.where(residual.sum(-1, keepdim=True) > 0, residual, p)
            generators = st.sampled_generators()
            out = result.output_token_ids.clone()  # [num_reqs, max_num_draft + 1]
            out[reqs, accepted[reqs]] = sample_from_probs(law, [generators[r] for r in reqs.tolist()])
            return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

        return verify
