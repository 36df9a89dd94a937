"""Sliding-window attention: which keys a query sees, and which KV blocks no future query can see.

Convention (the one HF transformers uses for Mistral, Gemma-2/3 and gpt-oss `sliding_window`, via
`masking_utils.sliding_window_overlay`: `kv_idx > q_idx - sliding_window`): a query at position p with
window w sees the w keys at positions max(0, p - w + 1) .. p, itself included. w = 1 sees only itself;
w >= p + 1 is full causal attention. `sliding_window=None` means no window (full causal attention).
"""

from __future__ import annotations

from collections.abc import Sequence


def check_window(sliding_window: int | None) -> None:
    if sliding_window is not None and sliding_window < 1:
        raise ValueError(f"sliding_window must be >= 1 or None (no window), got {sliding_window}")


def first_visible_key(position: int, sliding_window: int | None) -> int:
    """Position of the first key a query at `position` sees (the last one is `position` itself)."""
    check_window(sliding_window)
    return 0 if sliding_window is None else max(0, position - sliding_window + 1)


def first_visible_keys(query_start_loc: Sequence[int], seq_lens: Sequence[int], sliding_window: int) -> list[int]:
    """[num_tokens] first visible key of each query of a ragged batch (host copies of its metadata), from the
    requests' lengths: query j of request r sits at position seq_lens[r] - num_query[r] + j."""
    out: list[int] = []
    for r, seq_len in enumerate(seq_lens):
        num_query = query_start_loc[r + 1] - query_start_loc[r]
        out.extend(first_visible_key(seq_len - num_query + j, sliding_window) for j in range(num_query))
    return out


def num_blocks_outside_windows(num_committed: int, windows: Sequence[int | None], block_size: int) -> int:
    """Leading KV blocks of a request that no future query sees in any layer: blocks [0, result) may be freed.

    `num_committed` is the number of the request's keys that can no longer be rolled back (accepted tokens,
    not draft keys a verify may reject): every future query sits at a position >= num_committed, so it sees
    keys from num_committed - w + 1 on. A layer without a window (None) keeps every block.
    """
    if num_committed < 0 or block_size < 1:
        raise ValueError(f"need num_committed >= 0 and block_size >= 1, got {num_committed}, {block_size}")
    if not windows:
        raise ValueError("windows must list every layer's sliding_window (None for full attention)")
    first_needed = min(first_visible_key(num_committed, w) for w in windows)
    return first_needed // block_size
