"""Qwen3's q/k norm + RoPE + K/V store in one kernel (kernels/qk_norm_rope.py) == the eager chain (RMSNorm over each q
and k head, RotaryEmbedding.apply, the cache writes), padding slots untouched; and the gemv bias epilogue
(kernels/gemv.py `bias=`, with and without RoPE and the store) == F.linear with its bias."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from tests.kernels.test_kernel_gemv_rope import (  # noqa: E402
    HEAD_DIM,
    NUM_KV_HEADS,
    NUM_Q_HEADS,
    SENTINEL,
    eager_rope_store,
    rope_inputs,
)
from tests.support.projection_inputs import DEVICE, DTYPES, assert_close, inputs, reference_norm  # noqa: E402

from specbench.kernels.gemv import GemvConfig, gemv  # noqa: E402
from specbench.kernels.qk_norm_rope import qk_norm_rope_store  # noqa: E402
from specbench.models.layers import RotaryEmbedding  # noqa: E402

QKV_ROWS = (NUM_Q_HEADS + 2 * NUM_KV_HEADS) * HEAD_DIM


def eager_qk_norm_rope_store(qkv, q_norm_weight, k_norm_weight, rope):
    """The eager chain into copies of the caches: (q, k_cache, v_cache)."""
    n = qkv.shape[0]
    q, k, v = qkv.split([NUM_Q_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM], -1)
    q = reference_norm(q.reshape(n, NUM_Q_HEADS, HEAD_DIM), q_norm_weight, 1e-6)
    k = reference_norm(k.reshape(n, NUM_KV_HEADS, HEAD_DIM), k_norm_weight, 1e-6)
    q, k = RotaryEmbedding.apply(q, rope.cos_sin), RotaryEmbedding.apply(k, rope.cos_sin)
    k_cache, v_cache = rope.k_cache.clone(), rope.v_cache.clone()
    is_slot = rope.slot_mapping >= 0
    slots = rope.slot_mapping[is_slot]
    k_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[slots] = k[is_slot]
    v_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[slots] = v.reshape(n, NUM_KV_HEADS, HEAD_DIM)[is_slot]
    return q.reshape(n, -1), k_cache, v_cache


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("num_tokens", [1, 5, 20])  # the pool has 24 slots
def test_qk_norm_rope_store_matches_the_eager_chain(dtype, num_tokens):
    rope = rope_inputs(num_tokens, dtype, seed=num_tokens)
    gen = torch.Generator(device=DEVICE).manual_seed(num_tokens)
    qkv = (3 * torch.randn(num_tokens, QKV_ROWS, generator=gen, device=DEVICE)).to(dtype)
    q_norm_weight = (1 + 0.3 * torch.randn(HEAD_DIM, generator=gen, device=DEVICE)).to(dtype)
    k_norm_weight = (1 + 0.3 * torch.randn(HEAD_DIM, generator=gen, device=DEVICE)).to(dtype)
    want_q, want_k, want_v = eager_qk_norm_rope_store(qkv, q_norm_weight, k_norm_weight, rope)
    q = qk_norm_rope_store(qkv, q_norm_weight, k_norm_weight, 1e-6, rope.cos_sin, rope.slot_mapping, rope.k_cache,
                           rope.v_cache, NUM_Q_HEADS, NUM_KV_HEADS)
    assert_close(q, want_q)
    assert_close(rope.k_cache, want_k)
    assert_close(rope.v_cache, want_v)
    assert torch.equal(rope.v_cache, want_v)  # v is stored as it is
    is_written = torch.zeros(rope.k_cache.shape[:2], dtype=torch.bool, device=DEVICE).view(-1)
    is_written[rope.slot_mapping[rope.slot_mapping >= 0]] = True
    assert (rope.k_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[~is_written] == SENTINEL).all()  # padding: nothing


def test_qk_norm_rope_store_refuses_shapes_it_cannot_take():
    rope = rope_inputs(2, torch.float32, seed=0)
    qkv = torch.zeros(2, QKV_ROWS - HEAD_DIM, device=DEVICE)
    with pytest.raises(ValueError, match="qkv"):
        qk_norm_rope_store(qkv, rope.cos_sin[0, 0], rope.cos_sin[0, 0], 1e-6, rope.cos_sin, rope.slot_mapping,
                           rope.k_cache, rope.v_cache, NUM_Q_HEADS, NUM_KV_HEADS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("num_tokens, config", [
    (1, None),  # CUDA cores, the norm fused too
    (3, None),  # tensor-core tiles
    (16, GemvConfig(block_n=16, block_k=32, num_warps=4, is_dot=True, programs_per_sm=1, is_flat=True)),
], ids=["1", "3", "16-persistent"])
def test_bias_epilogue_matches_linear_with_bias(dtype, num_tokens, config):
    # Widths off the tile sizes (masked tails); with a residual (o_proj) and with a norm (qkv at one token).
    x, weight, norm_weight, residual = inputs(num_tokens, 87, 200, dtype, seed=num_tokens)
    bias = torch.randn(87, device=DEVICE).to(dtype)
    assert_close(gemv(x, weight, bias=bias, residual=residual, config=config), residual + F.linear(x, weight, bias))
    assert_close(gemv(x, weight, bias=bias, norm_weight=norm_weight, eps=1e-5, config=config),
                 F.linear(reference_norm(x, norm_weight, 1e-5), weight, bias))
    with pytest.raises(ValueError, match="bias"):
        gemv(x, torch.cat([weight, weight]), bias=torch.cat([bias, bias]), is_gated=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("num_tokens", [1, 3])
def test_bias_rides_before_rope_and_the_store(dtype, num_tokens):
    # gpt-oss / Qwen2 / GLM: q/k/v biases, then RoPE on q and k, k and v into the cache.
    from specbench.kernels.gemv_rope import RopeStore

    rope = rope_inputs(num_tokens, dtype, seed=20 + num_tokens)
    x, weight, _, _ = inputs(num_tokens, QKV_ROWS, 96, dtype, seed=30 + num_tokens)
    bias = torch.randn(QKV_ROWS, device=DEVICE).to(dtype)
    # The eager chain's projection with the bias: the same as a bias-free projection of x plus the bias, so feed
    # eager_rope_store an augmented input whose last column is one and whose weight column is the bias.
    ones = torch.ones(num_tokens, 1, device=DEVICE, dtype=dtype)
    want_q, want_k, want_v = eager_rope_store(torch.cat([x, ones], -1), torch.cat([weight, bias[:, None]], -1), rope)
    fresh = RopeStore(rope.cos_sin, rope.slot_mapping, rope.k_cache.clone(), rope.v_cache.clone(), NUM_Q_HEADS,
                      NUM_KV_HEADS, HEAD_DIM)
    q = gemv(x, weight, bias=bias, rope=fresh)
    assert_close(q, want_q)
    assert_close(fresh.k_cache, want_k)
    assert_close(fresh.v_cache, want_v)
