"""The torch reference's sliding window, sinks and soft-capping against HF transformers' own mask construction
and eager attention functions (gpt-oss sinks, Gemma-2 soft-capping); tiny shapes, no hub."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from specbench.attention.torch_ref import paged_attention_reference, visible_key_mask
from tests.support.window_batches import (
    expected_visible_average,
    position_revealing_batch,
    window_batch,
)

masking_utils = pytest.importorskip("transformers.masking_utils")

# Ragged: a prefill longer than every window, a verify of k + 1 = 4 queries, a decode, a short extend.
NUM_QUERY = [9, 4, 1, 3]
NUM_CONTEXT = [0, 11, 17, 2]


def batch(dtype=torch.float32, seed=0, num_heads=4, num_kv_heads=2):
    return window_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, num_heads=num_heads, num_kv_heads=num_kv_heads,
                        head_dim=16, block_size=4, dtype=dtype, device="cpu", seed=seed)


def hf_sliding_mask(num_query: int, seq_len: int, sliding_window: int) -> torch.Tensor:  # [num_query, seq_len]
    mask = masking_utils.sdpa_mask(
        batch_size=1, q_length=num_query, kv_length=seq_len, q_offset=seq_len - num_query,
        mask_function=masking_utils.sliding_window_causal_mask_function(sliding_window),
        allow_is_causal_skip=False, device="cpu",
    )
    return mask[0, 0]


@pytest.mark.parametrize("sliding_window", [1, 2, 3, 5, 8, 40])
def test_window_mask_matches_hf_sliding_window_causal_mask(sliding_window):
    md = batch().md
    mask = visible_key_mask(md, sliding_window)
    for r, (n, c) in enumerate(zip(NUM_QUERY, NUM_CONTEXT)):
        assert torch.equal(mask[r, :n, : c + n], hf_sliding_mask(n, c + n, sliding_window)), r
        assert not mask[r, :n, c + n:].any()  # nothing past the request's own keys


def test_window_mask_matches_the_mask_hf_mistral_builds():
    """The model-level builder Mistral, Gemma-3 and gpt-oss all call (prefill of one 9-token prompt, window 3)."""
    from transformers import MistralConfig

    config = MistralConfig(sliding_window=3, hidden_size=8, num_attention_heads=2, num_key_value_heads=1,
                           intermediate_size=8, num_hidden_layers=1, vocab_size=16)
    config._attn_implementation = "sdpa"
    hf = masking_utils.create_sliding_window_causal_mask(
        config, torch.zeros(1, 9, 8), torch.ones(1, 9, dtype=torch.long), None,
        position_ids=torch.arange(9)[None], allow_is_causal_skip=False)
    assert torch.equal(visible_key_mask(batch().md, 3)[0, :9, :9], hf[0, 0])


@pytest.mark.parametrize("sliding_window", [1, 3, 6])
def test_each_query_sees_exactly_its_window(sliding_window):
    b = position_revealing_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, block_size=4, device="cpu")
    out = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=sliding_window)
    expected = expected_visible_average(b, sliding_window)
    torch.testing.assert_close(out[:, 0], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(out[:, 1], expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("shift", [-1, 1])
def test_a_window_off_by_one_changes_the_output(shift):
    """Mutant-style: the start shifted by one key changes some query's output (the crafted input shows it)."""
    b = position_revealing_batch(num_query=NUM_QUERY, num_context=NUM_CONTEXT, block_size=4, device="cpu")
    right = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=4)
    shifted = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=4 + shift)
    assert (right - shifted).abs().max() > 0.05


def test_window_covering_every_sequence_is_full_attention_bit_for_bit():
    b = batch(dtype=torch.bfloat16, seed=3)
    full = paged_attention_reference(b.q, *b.flat_caches(), b.md)
    assert torch.equal(paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=b.md.max_seq_len), full)
    assert torch.equal(paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=10**6), full)
    assert not torch.equal(paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=5), full)


def test_explicit_softmax_path_agrees_with_sdpa():
    """A cap far above every score and sinks at -inf change nothing: the spelled-out path equals SDPA's."""
    b = batch(seed=4)
    for window in (None, 3):
        sdpa = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=window)
        capped = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=window, softcap=1e6)
        no_sink = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=window,
                                            sinks=torch.full((4,), float("-inf")))
        torch.testing.assert_close(capped, sdpa, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(no_sink, sdpa, atol=1e-6, rtol=1e-6)


def test_a_big_sink_takes_all_the_mass_and_a_small_one_none():
    b = batch(seed=5)
    plain = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=3)
    big = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=3, sinks=torch.full((4,), 60.0))
    small = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=3, sinks=torch.full((4,), -60.0))
    assert big.abs().max() < 1e-12
    torch.testing.assert_close(small, plain, atol=1e-6, rtol=1e-6)


def _hf_inputs(b, r: int):
    """(query [1, heads, n, d], key/value [1, kv_heads, seq_len, d]) of request r, from the paged batch."""
    k_flat, v_flat = b.flat_caches()
    n, c = NUM_QUERY[r], NUM_CONTEXT[r]
    blocks = torch.tensor(b.md.block_tables_cpu[r])
    pos = torch.arange(c + n)
    slots = blocks[pos // 4] * 4 + pos % 4
    start = b.md.query_start_loc_cpu[r]
    query = b.q[start:start + n].transpose(0, 1)[None]
    return query, k_flat[slots].transpose(0, 1)[None], v_flat[slots].transpose(0, 1)[None]


@pytest.mark.parametrize("sliding_window", [None, 3])
def test_sinks_match_hf_gpt_oss_eager_attention(sliding_window):
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    b = batch(seed=6)
    sinks = torch.tensor([2.0, -1.0, 0.5, 8.0])
    out = paged_attention_reference(b.q, *b.flat_caches(), b.md, sliding_window=sliding_window, sinks=sinks)
    module = SimpleNamespace(sinks=sinks, num_key_value_groups=2, training=False)
    for r, (n, c) in enumerate(zip(NUM_QUERY, NUM_CONTEXT)):
        visible = hf_sliding_mask(n, c + n, sliding_window or c + n)
        additive = torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))[None, None]
        expected, _ = eager_attention_forward(module, *_hf_inputs(b, r), additive, scaling=16 ** -0.5)
        start = b.md.query_start_loc_cpu[r]
        torch.testing.assert_close(out[start:start + n], expected[0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("sliding_window", [None, 2])
def test_softcap_matches_hf_gemma2_eager_attention(sliding_window):
    from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

    b = batch(seed=7)
    out = paged_attention_reference(b.q * 4, *b.flat_caches(), b.md, sliding_window=sliding_window, softcap=2.0)
    module = SimpleNamespace(head_dim=16, num_key_value_groups=2, training=False)
    for r, (n, c) in enumerate(zip(NUM_QUERY, NUM_CONTEXT)):
        visible = hf_sliding_mask(n, c + n, sliding_window or c + n)
        additive = torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))[None, None]
        query, key, value = _hf_inputs(b, r)
        expected, _ = eager_attention_forward(module, query * 4, key, value, additive, softcap=2.0)
        start = b.md.query_start_loc_cpu[r]
        torch.testing.assert_close(out[start:start + n], expected[0], atol=1e-6, rtol=1e-5)


def test_bad_window_is_refused():
    with pytest.raises(ValueError, match="sliding_window"):
        visible_key_mask(batch().md, 0)
