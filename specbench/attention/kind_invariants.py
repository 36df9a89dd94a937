"""INV-KIND (debug invariant): each layer's kind metadata against an independent recomputation.

A windowed layer's query j of request r sits at position p = seq_lens[r] - num_query[r] + j (the keys it sees, from
the request's lengths, not from `positions` nor from the builder) and must see keys from first_visible_key(p, w) on.
Catches window metadata carried over from another forward (a draft step reusing step 1's), a window start off by
one, and a windowed layer running without its window (verify or catch-up built without kinds).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specbench.attention.invariants import InvariantViolation
from specbench.attention.kind_metadata import WindowMetadata
from specbench.attention.kinds import AttentionKind, SlidingWindowAttention
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.window import first_visible_key


def check_layer_kinds(md: AttentionMetadata, kinds: Sequence[AttentionKind], where: str = "") -> None:
    windowed = [(layer, kind) for layer, kind in enumerate(kinds) if isinstance(kind, SlidingWindowAttention)]
    if not windowed:
        return
    if len(md.layer_kinds) != len(kinds):
        raise InvariantViolation(f"{where}: INV-KIND violated: metadata has kinds for {len(md.layer_kinds)} layers, "
                                 f"the model declares {len(kinds)} (a windowed layer would run without its window)")
    if md.positions.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    expected: dict[int, list[int]] = {}  # window -> [num_tokens] first visible key of each query
    checked: set[int] = set()  # ids of window_starts tensors already compared (layers of one kind share one)
    for layer, kind in windowed:
        got = md.layer_kinds[layer]
        if not isinstance(got, WindowMetadata) or got.sliding_window != kind.window:
            raise InvariantViolation(f"{where}: INV-KIND violated: layer {layer} is declared a window of {kind.window} "
                                     f"keys, its metadata is {type(got).__name__}")
        if id(got.window_starts) in checked:
            continue
        checked.add(id(got.window_starts))
        if kind.window not in expected:
            expected[kind.window] = _first_visible_keys(md, kind.window)
        starts = got.window_starts.view(-1).tolist()
        if starts != expected[kind.window]:
            t = next(i for i, (a, b) in enumerate(zip(starts, expected[kind.window])) if a != b) if len(starts) == len(
                expected[kind.window]) else 0
            raise InvariantViolation(
                f"{where}: INV-KIND violated: layer {layer} (window {kind.window}) query token {t} starts its window "
                f"at key {starts[t] if starts else None}, its position says {expected[kind.window][t]}")


def _first_visible_keys(md: AttentionMetadata, window: int) -> list[int]:
    """[num_tokens] from the requests' lengths: query j of request r sits at seq_lens[r] - num_query[r] + j."""
    cu = md.query_start_loc_cpu
    out: list[int] = []
    for r in range(md.num_reqs):
        num_query = cu[r + 1] - cu[r]
        first = md.seq_lens_cpu[r] - num_query
        out.extend(first_visible_key(first + j, window) for j in range(num_query))
    return out
