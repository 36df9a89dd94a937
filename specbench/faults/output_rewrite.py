"""The skeleton of the target-side mutants: run the real verifier, then replace one output token per request.

`pick(target_logits, st, r, first_row, num_draft, num_accepted)` sees request r's rows
[first_row, first_row + num_draft] of `target_logits` ([num_tokens, vocab]) and returns the token that replaces
`output_token_ids[r, num_accepted]` (the recovered or bonus slot), or None to keep the verifier's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Pick = Callable[[torch.Tensor, Any, int, int, int, int], "torch.Tensor | None"]


def rewrite_output_token(verify_fn: Callable, pick: Pick) -> Callable:
    def verify(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st):
        result = verify_fn(target_logits, draft_token_ids, num_draft_tokens, draft_probs, st)
        out = result.output_token_ids.clone()  # [num_reqs, max_num_draft + 1]
        first_row = 0
        for r, (n, a) in enumerate(zip(num_draft_tokens.tolist(), result.num_accepted.tolist())):
            token = pick(target_logits, st, r, first_row, n, a)
            if token is not None:
                out[r, a] = token
            first_row += 1 + n
        return type(result)(output_token_ids=out, num_accepted=result.num_accepted)

    return verify
