"""The kernels of Qwen3-Next's fused gated attention (models/gated_attention_fused.py) == the eager layer's pieces
(models/qwen3_next.py GatedSelfAttention: OffsetRMSNorm over each q and k head, RoPE on the first rotary_dim dims,
the cache writes; `x * torch.sigmoid(gate)` into F.linear):
- kernels/qk_norm_rope.py with each q head followed by its gate, (1 + weight) norms and partial RoPE;
- kernels/gemv.py's InputGate prologue, on the CUDA cores (one token) and the tensor cores (several).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from tests.kernels.test_kernel_gemv_rope import BLOCK_SIZE, NUM_BLOCKS, SENTINEL  # noqa: E402
from tests.support.projection_inputs import DEVICE, DTYPES, assert_close  # noqa: E402

from specbench.kernels.gemv import GemvConfig, InputGate, gemv  # noqa: E402
from specbench.kernels.qk_norm_rope import qk_norm_rope_store  # noqa: E402
from specbench.models.layers import OffsetRMSNorm, RotaryEmbedding  # noqa: E402

NUM_Q_HEADS, NUM_KV_HEADS, HEAD_DIM = 4, 2, 32
Q_SIZE, KV_SIZE = NUM_Q_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM


def _offset_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:  # [..., head_dim]
    norm = OffsetRMSNorm(HEAD_DIM, 1e-6).to(x.device, x.dtype)
    norm.weight.data.copy_(weight)
    return norm.reference(x)


def _rotate(x: torch.Tensor, cos_sin: torch.Tensor, rotary_dim: int) -> torch.Tensor:  # as GatedSelfAttention
    return torch.cat([RotaryEmbedding.apply(x[..., :rotary_dim], cos_sin), x[..., rotary_dim:]], dim=-1)


def _case(num_tokens: int, dtype: torch.dtype, rotary_dim: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    qkv = (3 * torch.randn(num_tokens, 2 * Q_SIZE + 2 * KV_SIZE, generator=gen)).to(DEVICE, dtype)
    q_w, k_w = (0.3 * torch.randn(2, HEAD_DIM, generator=gen)).to(DEVICE, dtype)
    angles = torch.rand(num_tokens, rotary_dim // 2, generator=gen) * 6.28 * torch.arange(1, rotary_dim // 2 + 1)
    angles = torch.cat([angles, angles], dim=-1)
    cos_sin = torch.stack([angles.cos(), angles.sin()], dim=1).to(DEVICE)  # [n, 2, rotary_dim] fp32
    slots = torch.randperm(NUM_BLOCKS * BLOCK_SIZE, generator=gen)[:num_tokens]
    slots[num_tokens // 2] = -1  # a padding token
    cache = torch.full((NUM_BLOCKS, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM), SENTINEL, dtype=dtype, device=DEVICE)
    return qkv, q_w, k_w, cos_sin, slots.to(DEVICE), cache, cache.clone()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rotary_dim", [8, 16, HEAD_DIM])  # a quarter, a half (Qwen3-Next's 0.25, the tiny's 0.5), all
@pytest.mark.parametrize("num_tokens", [1, 5])
def test_gated_qk_norm_partial_rope_store_matches_the_eager_layer(dtype, rotary_dim, num_tokens):
    qkv, q_w, k_w, cos_sin, slots, k_cache, v_cache = _case(num_tokens, dtype, rotary_dim, seed=rotary_dim + num_tokens)
    n = num_tokens
    q_gate, k, v = qkv.split([2 * Q_SIZE, KV_SIZE, KV_SIZE], dim=-1)
    q = q_gate.view(n, NUM_Q_HEADS, 2 * HEAD_DIM)[..., :HEAD_DIM]
    want_q = _rotate(_offset_norm(q, q_w), cos_sin, rotary_dim).reshape(n, -1)
    want_k = _rotate(_offset_norm(k.reshape(n, NUM_KV_HEADS, HEAD_DIM), k_w), cos_sin, rotary_dim)
    want_k_cache, want_v_cache = k_cache.clone(), v_cache.clone()
    is_slot = slots >= 0
    want_k_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[slots[is_slot]] = want_k[is_slot]
    want_v_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)[slots[is_slot]] = v.reshape(n, NUM_KV_HEADS, HEAD_DIM)[is_slot]

    got_q = qk_norm_rope_store(qkv, q_w, k_w, 1e-6, cos_sin, slots, k_cache, v_cache, NUM_Q_HEADS, NUM_KV_HEADS,
                               is_q_gated=True, rotary_dim=rotary_dim, is_offset=True)
    assert_close(got_q, want_q)
    assert_close(k_cache, want_k_cache)
    assert torch.equal(v_cache, want_v_cache)  # v as it is; padding rows store nothing


def test_gated_layout_refuses_a_mismatched_width():
    qkv, q_w, k_w, cos_sin, slots, k_cache, v_cache = _case(2, torch.float32, 16, seed=0)
    with pytest.raises(ValueError, match="qkv"):  # the plain layout's width is not the gated one's
        qk_norm_rope_store(qkv[:, Q_SIZE:], q_w, k_w, 1e-6, cos_sin, slots, k_cache, v_cache, NUM_Q_HEADS,
                           NUM_KV_HEADS, is_q_gated=True, rotary_dim=16, is_offset=True)
    with pytest.raises(ValueError, match="cos_sin"):
        qk_norm_rope_store(qkv, q_w, k_w, 1e-6, cos_sin, slots, k_cache, v_cache, NUM_Q_HEADS, NUM_KV_HEADS,
                           is_q_gated=True, rotary_dim=8, is_offset=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("num_tokens, config", [
    (1, None),  # CUDA cores
    (4, None),  # tensor-core tiles
    (3, GemvConfig(block_n=16, block_k=32, num_warps=4, is_dot=True)),  # several K steps across head boundaries
])
def test_input_gate_prologue_matches_sigmoid_product_then_linear(dtype, num_tokens, config):
    gen = torch.Generator().manual_seed(num_tokens)
    qkv = (2 * torch.randn(num_tokens, 2 * Q_SIZE + 2 * KV_SIZE, generator=gen)).to(DEVICE, dtype)
    attn = torch.randn(num_tokens, Q_SIZE, generator=gen).to(DEVICE, dtype)
    weight = (Q_SIZE ** -0.5 * torch.randn(48, Q_SIZE, generator=gen)).to(DEVICE, dtype)
    gate = qkv[:, :2 * Q_SIZE].view(num_tokens, NUM_Q_HEADS, 2 * HEAD_DIM)[..., HEAD_DIM:]
    want = F.linear(attn * torch.sigmoid(gate.reshape(num_tokens, -1)), weight)
    got = gemv(attn, weight, input_gate=InputGate(qkv[:, HEAD_DIM:], HEAD_DIM, 2 * HEAD_DIM), config=config)
    assert_close(got, want)
    # the gate matters: the same projection without it is far off
    assert not torch.allclose(gemv(attn, weight, config=config).float(), want.float(), atol=1e-2)


def test_input_gate_refuses_a_short_source_or_a_norm():
    attn = torch.randn(2, Q_SIZE, device=DEVICE)
    weight = torch.randn(8, Q_SIZE, device=DEVICE)
    with pytest.raises(ValueError, match="input gate"):
        gemv(attn, weight, input_gate=InputGate(torch.zeros(2, Q_SIZE, device=DEVICE), HEAD_DIM, 2 * HEAD_DIM))
    with pytest.raises(ValueError, match="input gate"):
        gemv(attn, weight, norm_weight=torch.ones(Q_SIZE, device=DEVICE),
             input_gate=InputGate(torch.zeros(2, 2 * Q_SIZE, device=DEVICE), HEAD_DIM, 2 * HEAD_DIM))
