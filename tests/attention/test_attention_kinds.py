"""The attention-kind plug point: the registry, each kind's builder, LayerKinds.attach, the torch backend reading the
per-layer window from the metadata, and INV-KIND (kind_invariants.py) catching stale, shifted and missing windows."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tests.support.window_batches import expected_visible_average, position_revealing_batch, window_batch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.kind_invariants import check_layer_kinds
from specbench.attention.kind_metadata import FullAttentionMetadata, WindowMetadata
from specbench.attention.kinds import ATTENTION_KINDS, FullAttention, SlidingWindowAttention
from specbench.attention.layer_kinds import LayerKinds
from specbench.attention.metadata import build_metadata
from specbench.attention.torch_ref import TorchPagedAttention, paged_attention_reference
from specbench.attention.window import first_visible_key
from specbench.errors import SpecbenchError
from specbench.kv.kv_cache import KVCache, KVCacheSpec

CPU = torch.device("cpu")
# Prefill shorter and longer than the window, an extend, a decode and a verify of k + 1 = 4 queries.
NUM_QUERY, NUM_CONTEXT = [9, 3, 1, 4], [0, 6, 20, 11]


def test_registry_creates_kinds_and_names_the_supported_ones_for_an_unknown_one():
    assert ATTENTION_KINDS.create("full") == FullAttention()
    assert ATTENTION_KINDS.create("sliding_window", 4) == SlidingWindowAttention(4)
    with pytest.raises(SpecbenchError, match="unknown attention kind 'recurrent'; supported: full, gated_delta_net, mamba2, sliding_window"):
        ATTENTION_KINDS.create("recurrent")
    with pytest.raises(ValueError, match="sliding_window must be >= 1"):
        SlidingWindowAttention(0)


@pytest.mark.parametrize("window", [1, 3, 8, 100])
def test_window_builder_starts_each_query_at_its_own_first_visible_key(window):
    md = window_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, num_heads=2, num_kv_heads=1, head_dim=8,
                      block_size=4, dtype=torch.float32, device=CPU).md
    built = SlidingWindowAttention(window).build(md)
    assert isinstance(built, WindowMetadata) and built.sliding_window == window
    assert built.window_starts.dtype == torch.int32
    assert built.window_starts.tolist() == [first_visible_key(p, window) for p in md.positions_cpu]


def test_attach_leaves_full_attention_models_untouched_and_shares_one_build_per_kind():
    md = window_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, num_heads=2, num_kv_heads=1, head_dim=8,
                      block_size=4, dtype=torch.float32, device=CPU).md
    assert LayerKinds.of((), 3).attach(md, "prefill") is md  # byte-identical path for full-attention models
    window = SlidingWindowAttention(5)
    attached = LayerKinds.of((window, FullAttention(), window), 3).attach(md, "prefill")
    local, full, local_again = attached.layer_kinds
    assert isinstance(full, FullAttentionMetadata) and local is local_again
    assert attached.kind_of(0) is local and md.kind_of(0) is None
    with pytest.raises(ValueError, match="2 attention kinds for 3 layers"):
        LayerKinds.of((window, window), 3)


def _paged_cache(batch, num_layers: int) -> KVCache:
    num_blocks, block_size, num_kv_heads, head_dim = batch.k_cache.shape
    cache = KVCache(KVCacheSpec(num_layers, num_kv_heads, head_dim, batch.k_cache.dtype), num_blocks, block_size, CPU)
    for layer in range(num_layers):
        cache.k[layer].copy_(batch.k_cache)
        cache.v[layer].copy_(batch.v_cache)
    return cache


def test_torch_backend_attends_each_layer_over_its_own_kind():
    b = position_revealing_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, block_size=4, device=CPU)
    kinds = LayerKinds.of((SlidingWindowAttention(3), FullAttention()), 2)
    md = kinds.attach(b.md, "verify")
    backend, cache = TorchPagedAttention(), _paged_cache(b, 2)
    torch.testing.assert_close(backend.attend_stored(0, b.q, cache, md), expected_visible_average(b, 3)[:, None]
                               .expand(-1, 2, -1), atol=1e-6, rtol=0)
    torch.testing.assert_close(backend.attend_stored(1, b.q, cache, md), expected_visible_average(b, None)[:, None]
                               .expand(-1, 2, -1), atol=1e-6, rtol=0)


def test_reference_reads_the_window_starts_it_is_given_not_the_window_size():
    b = position_revealing_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, block_size=4, device=CPU)
    starts = SlidingWindowAttention(4).build(b.md).window_starts
    by_size = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=4)
    assert torch.equal(paged_attention_reference(b.q, *b.flat_caches(), b.md, window_starts=starts), by_size)
    wider = paged_attention_reference(b.q, *b.flat_caches(), b.md, window_starts=(starts - 1).clamp(min=0))
    assert torch.equal(wider, paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=5))


def _attached(window: int = 3):
    md = window_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, num_heads=2, num_kv_heads=1, head_dim=8,
                      block_size=4, dtype=torch.float32, device=CPU).md
    kinds = (SlidingWindowAttention(window), FullAttention())
    return md, kinds, LayerKinds.of(kinds, 2).attach(md, "verify")


def test_kind_invariant_accepts_freshly_built_windows():
    md, kinds, attached = _attached()
    check_layer_kinds(attached, kinds, "verify")
    check_layer_kinds(md, (FullAttention(),) * 2, "verify")  # nothing to check on full-attention models


def test_kind_invariant_catches_a_window_carried_over_from_another_forward():
    kinds = (SlidingWindowAttention(3), FullAttention())
    # The next draft step: every query one position on, the window metadata left as step 1 built it.
    step1 = build_metadata(positions=[7, 12], num_query=[1, 1], seq_lens=[8, 13], block_tables=[[0, 1], [2, 3, 4, 5]],
                           block_size=4, device=CPU)
    step2 = build_metadata(positions=[8, 13], num_query=[1, 1], seq_lens=[9, 14], block_tables=[[0, 1, 6], [2, 3, 4, 5]],
                           block_size=4, device=CPU)
    stale = dataclasses.replace(step2, layer_kinds=LayerKinds.of(kinds, 2).attach(step1, "draft_step_1").layer_kinds)
    with pytest.raises(InvariantViolation, match="INV-KIND violated: layer 0 .* starts its window at key 5, its "
                                                 "position says 6"):
        check_layer_kinds(stale, kinds, "draft_step_2")


@pytest.mark.parametrize("shift", [-1, 1])
def test_kind_invariant_catches_a_window_start_off_by_one(shift):
    _, kinds, attached = _attached(window=2)
    window = attached.layer_kinds[0]
    shifted = dataclasses.replace(window, window_starts=(window.window_starts + shift).clamp(min=0))
    bad = dataclasses.replace(attached, layer_kinds=(shifted, attached.layer_kinds[1]))
    with pytest.raises(InvariantViolation, match="INV-KIND violated"):
        check_layer_kinds(bad, kinds, "prefill")


def test_kind_invariant_catches_a_windowed_layer_running_without_its_window():
    md, kinds, attached = _attached()
    with pytest.raises(InvariantViolation, match="metadata has kinds for 0 layers, the model declares 2"):
        check_layer_kinds(md, kinds, "verify")
    as_full = dataclasses.replace(attached, layer_kinds=(FullAttention().build(md), FullAttention().build(md)))
    with pytest.raises(InvariantViolation, match="layer 0 is declared a window of 3 keys, its metadata is Full"):
        check_layer_kinds(as_full, kinds, "verify")
