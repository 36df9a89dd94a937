"""Prompt-lookup drafting: continue the longest suffix n-gram that already occurred in the context."""

from __future__ import annotations

import numpy as np

from specbench.errors import SpecbenchError


def propose_ngram(token_ids: np.ndarray, *, min_n: int, max_n: int, num_draft_tokens: int) -> np.ndarray:
    """Up to `num_draft_tokens` tokens that followed the earliest earlier occurrence of the longest
    suffix n-gram (min_n <= n <= max_n); empty when no such n-gram recurs.

    O(max_n * len) vectorized: for every candidate end position e < len - 1 (an occurrence that is
    not the suffix itself) grow, one offset at a time, the length of the common suffix of
    token_ids[:e + 1] and token_ids.
    """
    if min_n < 1:
        raise SpecbenchError(f"n-gram min_n must be >= 1, got {min_n}")
    if max_n < min_n:
        raise SpecbenchError(f"n-gram max_n must be >= min_n ({min_n}), got {max_n}")
    if num_draft_tokens < 0:
        raise SpecbenchError(f"num_draft_tokens must be >= 0, got {num_draft_tokens}")
    tokens = np.asarray(token_ids)
    if tokens.ndim != 1:
        raise ValueError(f"token_ids must be 1-D, got shape {tokens.shape}")
    num_tokens = len(tokens)
    if num_tokens < min_n + 1 or num_draft_tokens == 0:
        return tokens[:0].copy()

    num_ends = num_tokens - 1  # candidate occurrence ends e in [0, num_tokens - 2]
    match_len = np.zeros(num_ends, dtype=np.int64)  # [num_ends], common suffix length, capped at max_n
    is_alive = np.ones(num_ends, dtype=bool)  # [num_ends], still matching at offset j
    for j in range(min(max_n, num_ends)):
        # token at offset j before end e is tokens[e - j]; ends e < j cannot reach that far back
        is_alive[:j] = False
        is_alive[j:] &= tokens[: num_ends - j] == tokens[num_tokens - 1 - j]
        if not is_alive.any():
            break
        match_len += is_alive

    best_n = int(match_len.max())
    if best_n < min_n:
        return tokens[:0].copy()
    # ends are increasing and every match has length best_n, so the first end is the earliest start
    end = int(np.argmax(match_len >= best_n))
    return tokens[end + 1 : end + 1 + num_draft_tokens].copy()
