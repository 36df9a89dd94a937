"""Target-side classic: the recovered/bonus token is taken from the next (or previous) logits row."""

from __future__ import annotations

from collections.abc import Callable

from specbench.faults.fault import ALL_METHODS, Fault, Mutant


class BonusFromWrongRow(Mutant):
    fault = Fault("bonus-from-wrong-row", "the recovered/bonus token is taken from the next (or previous) logits row",
                  "", "target", ALL_METHODS)

    def wrap_verifier(self, verify_fn: Callable) -> Callable:
        def wrong_row_verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
            result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
            num_draft = num_draft_tokens.tolist()
            accepted = result.num_accepted.tolist()
            out = result.output_token_ids.clone()
            row = 0
            for r, (n, a) in enumerate(zip(num_draft, accepted)):
                if n > 0:  # plain decoding rounds stay correct: only speculation is mutated
                    wrong = a + 1 if a < n else a - 1
                    out[r, a] = target_logits[row + wrong].argmax()
                row += 1 + n
            return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

        return wrong_row_verify
