"""qkv with RoPE and the K/V store in its epilogue (kernels/gemv_rope.py through gemv's `rope=`) == the eager chain: (norm), qkv,
RotaryEmbedding.apply on q and k, k and v into the paged cache at each token's slot, padding slots untouched."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from tests.support.projection_inputs import DEVICE, DTYPES, assert_close, inputs, reference_norm  # noqa: E402

from specbench.kernels.gemv import GemvConfig, gemv  # noqa: E402
from specbench.kernels.gemv_rope import RopeStore  # noqa: E402
from specbench.models.layers import RotaryEmbedding  # noqa: E402

NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM = 4, 2, 32
NUM_BLOCKS, BLOCK_SIZE = 6, 4
SENTINEL = 7.0  # what the cache holds where nothing may be written


def rope_inputs(num_tokens: int, dtype: torch.dtype, seed: int):
    gen = torch.Generator().manual_seed(seed)
    angles = torch.rand(num_tokens, HEAD_DIM // 2, generator=gen) * 6.28 * torch.arange(1, HEAD_DIM // 2 + 1)
    angles = torch.cat([angles, angles], dim=-1)  # rotate-half layout: both halves share an angle
    cos_sin = torch.stack([angles.cos(), angles.sin()], dim=1).to(DEVICE)  # [num_tokens, 2, head_dim] fp32
    slots = torch.randperm(NUM_BLOCKS * BLOCK_SIZE, generator=gen)[:num_tokens]
    slots[num_tokens // 2] = -1  # a padding token
    cache_shape = (NUM_BLOCKS, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM)
    k_cache = torch.full(cache_shape, SENTINEL, dtype=dtype, device=DEVICE)
    return RopeStore(cos_sin, slots.to(DEVICE), k_cache, k_cache.clone(), NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM)


def eager_rope_store(x, weight, rope: RopeStore, norm_weight=None):
    """The eager chain, writing into copies of the caches; returns (q, k_cache, v_cache)."""
    if norm_weight is not None:
        x = reference_norm(x, norm_weight, 1e-5)
    n = x.shape[0]
    q, k, v = F.linear(x, weight).split([NUM_Q_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM], -1)
    q = RotaryEmbedding.apply(q.reshape(n, NUM_Q_HEADS, HEAD_DIM), rope.cos_sin)
    k = RotaryEmbedding.apply(k.reshape(n, NUM_KV_HEADS, HEAD_DIM), rope.cos_sin)
    k_cache, v_cache = rope.k_cache.clone(), rope.v_cache.clone()
    is_slot = rope.slot_mapping >= 0
    slots = rope.slot_mapping[is_slot]
    k_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[slots] = k[is_slot]
    v_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[slots] = v.reshape(n, NUM_KV_HEADS, HEAD_DIM)[is_slot]
    return q.reshape(n, -1), k_cache, v_cache


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("num_tokens, config", [
    (1, None),  # the one-token default: CUDA cores, the norm fused too
    (3, None),  # tensor-core tiles
    # asked for persistent tiles, which the epilogue's branches do not take (they run one program per tile)
    (16, GemvConfig(block_n=32, block_k=32, num_warps=4, is_dot=True, programs_per_sm=1, is_flat=True)),
], ids=["1-default", "3-default", "16-persistent-asked"])
def test_rope_and_store_match_the_eager_chain(dtype, num_tokens, config):
    rows = (NUM_Q_HEADS + 2 * NUM_KV_HEADS) * HEAD_DIM
    x, weight, norm_weight, _ = inputs(num_tokens, rows, 96, dtype, seed=num_tokens)
    rope = rope_inputs(num_tokens, dtype, seed=num_tokens)
    norm = {"norm_weight": norm_weight, "eps": 1e-5} if num_tokens == 1 else {}
    want_q, want_k, want_v = eager_rope_store(x, weight, rope, norm.get("norm_weight"))
    got_q = gemv(x, weight, rope=rope, config=config, **norm)
    assert_close(got_q, want_q)
    assert_close(rope.k_cache, want_k)
    assert_close(rope.v_cache, want_v)
    untouched = torch.ones(NUM_BLOCKS * BLOCK_SIZE, dtype=torch.bool, device=DEVICE)
    untouched[rope.slot_mapping[rope.slot_mapping >= 0]] = False
    assert (rope.k_cache.view(-1, NUM_KV_HEADS * HEAD_DIM)[untouched] == SENTINEL).all()
    assert (rope.v_cache.view(-1, NUM_KV_HEADS * HEAD_DIM)[untouched] == SENTINEL).all()


def test_refuses_what_does_not_fit():
    x, weight, _, _ = inputs(2, (NUM_Q_HEADS + 2 * NUM_KV_HEADS) * HEAD_DIM, 96, torch.float32, seed=0)
    rope = rope_inputs(2, torch.float32, seed=0)
    with pytest.raises(ValueError, match="plain qkv weight"):
        gemv(x, weight[:-1].contiguous(), rope=rope)
    with pytest.raises(ValueError, match="another epilogue"):
        gemv(x, weight, rope=rope, residual=torch.zeros(2, weight.shape[0], device=DEVICE))
    with pytest.raises(ValueError, match="cos_sin"):
        gemv(x, weight, rope=replace(rope, cos_sin=rope.cos_sin[:1]))
    with pytest.raises(ValueError, match="does not fit"):
        gemv(x, weight, rope=replace(rope, head_dim=16, num_q_heads=12, num_kv_heads=2))  # 8 dims a half
