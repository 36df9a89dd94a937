"""Target-side: the bonus token after full acceptance is read one row past the request's rows.

That row is the next request's first; for the batch's last request it does not exist and the verifier raises,
so this mutant is also the selftest's crash inside the engine.
"""

from __future__ import annotations

from collections.abc import Callable

from specbench.faults.fault import ALL_METHODS, Fault, Mutant


class BonusRowPastEnd(Mutant):
    fault = Fault("bonus-row-past-end", "the bonus token is read one row past the request's rows (raises for the last)",
                  "", "target", ALL_METHODS)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            num_draft = num_draft_tokens.tolist()
            accepted = result.num_accepted.tolist()
            out = result.output_token_ids.clone()
            row = 0
            for r, (n, a) in enumerate(zip(num_draft, accepted)):
                if n > 0 and a == n:
                    past = row + n + 1
                    if past >= target_logits.shape[0]:
                        raise IndexError(f"verify row {past} out of range for {target_logits.shape[0]} target rows")
                    out[r, a] = target_logits[past].argmax()
                row += 1 + n
            return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

        return verify
