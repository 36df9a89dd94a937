"""Fused decode projection (kernels/gemv.py) == the eager chain it replaces: [residual +] [silu*mul of] (norm | x) @ W.T.
Operands, dtypes and tolerances: tests/support/projection_inputs.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    pytest.mark.filterwarnings("ignore:overflow encountered in exp"),
]

from tests.support.projection_inputs import DTYPES, assert_close, inputs, reference_norm  # noqa: E402

from specbench.kernels.gemv import MAX_TOKENS, GemvConfig, gemv  # noqa: E402

BROADCAST = GemvConfig(block_n=4, block_k=64, num_warps=4, is_dot=False)
DOT = GemvConfig(block_n=16, block_k=32, num_warps=4, is_dot=True)
# Fewer programs than tiles (the interpreter counts 4 SMs): each walks several tiles.
PERSISTENT = GemvConfig(block_n=16, block_k=32, num_warps=4, is_dot=True, programs_per_sm=1, is_flat=True)


def eager(x, weight, *, norm_weight=None, eps=1e-5, is_gated=False, residual=None):
    if norm_weight is not None:
        x = reference_norm(x, norm_weight, eps)
    out = F.linear(x, weight)
    if is_gated:
        gate, up = out.chunk(2, dim=-1)
        out = F.silu(gate) * up
    return out if residual is None else residual + out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("config", [BROADCAST, DOT, PERSISTENT], ids=["broadcast", "dot", "persistent"])
@pytest.mark.parametrize("num_tokens", [1, 3, 16])
@pytest.mark.slow  # several seconds on 2 cores: the fast suite stays under 5 minutes
def test_every_fusion_matches_the_eager_chain(dtype, config, num_tokens):
    # Widths off the tile sizes: masked tails in both the output features and the input walk; 6 tiles of 16.
    x, weight, norm_weight, residual = inputs(num_tokens, 87, 200, dtype, seed=num_tokens)
    assert_close(gemv(x, weight, config=config), eager(x, weight))
    assert_close(gemv(x, weight, norm_weight=norm_weight, eps=1e-5, config=config),
                 eager(x, weight, norm_weight=norm_weight))
    assert_close(gemv(x, weight, residual=residual, config=config), eager(x, weight, residual=residual))
    x, weight, norm_weight, _ = inputs(num_tokens, 87, 200, dtype, seed=100 + num_tokens, is_gated=True)
    assert_close(gemv(x, weight, norm_weight=norm_weight, eps=1e-5, is_gated=True, config=config),
                 eager(x, weight, norm_weight=norm_weight, is_gated=True))


@pytest.mark.parametrize("dtype", [torch.float32, DTYPES[-1]], ids=str)
@pytest.mark.parametrize("num_tokens", [1, 2, 16, 17, 64])
def test_default_tiles(num_tokens, dtype):
    # The tiles the layers take (each token-count bucket, 16-bit and fp32 shared-memory budgets) on widths like a
    # small model's; the 8B shapes are the GPU benchmark's. One token fuses the norms, more run them apart.
    x, weight, norm_weight, residual = inputs(num_tokens, 192, 576, dtype, seed=7)
    norm = {"norm_weight": norm_weight, "eps": 1e-6} if num_tokens == 1 else {}
    assert_close(gemv(x, weight, **norm), eager(x, weight, **norm))
    assert_close(gemv(x, weight, residual=residual), eager(x, weight, residual=residual))
    x, weight, _, _ = inputs(num_tokens, 192, 576, dtype, seed=8, is_gated=True)
    assert_close(gemv(x, weight, is_gated=True, **norm), eager(x, weight, is_gated=True, **norm))


def test_rows_do_not_mix():
    # Each token's output depends on its own row only (a stride or mask slip would leak between rows).
    x, weight, norm_weight, _ = inputs(5, 40, 96, torch.float32, seed=3)
    full = gemv(x, weight, norm_weight=norm_weight, eps=1e-5, config=BROADCAST)
    for i in range(5):
        one = gemv(x[i:i + 1], weight, norm_weight=norm_weight, eps=1e-5, config=BROADCAST)
        torch.testing.assert_close(one, full[i:i + 1], atol=1e-6, rtol=1e-6)


def test_refuses_what_it_cannot_do():
    x, weight, _, _ = inputs(MAX_TOKENS + 1, 8, 32, torch.float32, seed=0)
    with pytest.raises(ValueError, match="at most"):
        gemv(x, weight)
    with pytest.raises(ValueError, match="contiguous"):
        gemv(x[:1], weight.t().contiguous().t())
    with pytest.raises(ValueError, match="residual"):
        gemv(x[:2], weight, residual=x[:2, :8].t())
    with pytest.raises(ValueError, match="norm weight"):
        gemv(x[:2], weight, norm_weight=x[0, :8])
    assert gemv(x[:0], weight).shape == (0, 8)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("config", [None, BROADCAST, DOT], ids=["default", "broadcast", "dot"])
@pytest.mark.parametrize("num_tokens", [1, 3])
def test_split_norm_is_two_norms_side_by_side(dtype, config, num_tokens):
    """norm_split: EAGLE-3's / MTP's [norm_a(embedding), norm_b(hidden)] input, both RMS taken apart, one kernel;
    the halves have different scales, so one RMS over the whole row would show."""
    x, weight, norm_weight, _ = inputs(num_tokens, 40, 96, dtype, seed=11 + num_tokens)
    x = torch.cat([x[:, :48] * 4, x[:, 48:]], dim=-1)
    expected = F.linear(torch.cat([reference_norm(x[:, :48], norm_weight[:48], 1e-5),
                                   reference_norm(x[:, 48:], norm_weight[48:], 1e-5)], dim=-1), weight)
    got = gemv(x, weight, norm_weight=norm_weight, eps=1e-5, norm_split=48, config=config)
    assert_close(got, expected)
    assert not torch.allclose(gemv(x, weight, norm_weight=norm_weight, eps=1e-5, config=config).float(),
                              expected.float(), atol=1e-2)
    with pytest.raises(ValueError, match="norm_split"):
        gemv(x, weight, norm_split=48)
