"""A Gated DeltaNet layer's uniform verify rows on our fused kernels (--recurrent-kernels triton:
kernels/gated_delta_verify.py through models/recurrent_kernels.py's binding, three launches between the
projections) against the same layer on the torch forms (its _split, recurrent/causal_conv.py,
recurrent/gated_delta_rule.py, GatedRMSNorm: no code shared with the kernels): the layer's output, every position's
kept conv and recurrent state, the slots left untouched. Grouped q/k heads, head dims and channel counts that are
not powers of two, slots out of order with others between them, the decay's softplus on both sides of its
threshold; both checkpoint layouts of the input projections (Qwen3-Next's interleaved qkvz / ba, Qwen3.5's split
qkv / z / b / a)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.recurrent.config import GatedDeltaNetConfig  # noqa: E402
from specbench.recurrent.gated_delta_net import GatedDeltaNet  # noqa: E402
from specbench.models.recurrent_kernels import TritonDeltaVerify  # noqa: E402
from specbench.recurrent.kernel_choice import TORCH, TRITON, TRITON_VERIFY_PATH, set_recurrent_kernels  # noqa: E402
from specbench.recurrent.state_cache import StateCache  # noqa: E402
from specbench.recurrent.state_rows import state_rows  # noqa: E402
from specbench.recurrent.state_shape import StateShape  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CONFIG = GatedDeltaNetConfig(num_k_heads=2, num_v_heads=4, k_dim=12, v_dim=40, conv_kernel_size=4)  # 2 value tiles
HIDDEN = 24
NUM_SLOTS = 6


class _Paths:
    def __init__(self) -> None:
        self.taken: set[str] = set()

    def record(self, name: str) -> None:
        self.taken.add(name)


def _layer(dtype: torch.dtype, is_split: bool = False) -> GatedDeltaNet:
    torch.manual_seed(0)
    layer = GatedDeltaNet(dataclasses.replace(CONFIG, is_split_projections=is_split), HIDDEN, 1e-6, state_layer=0)
    for param in layer.parameters():
        param.data.normal_(0, 0.3)
    layer.dt_bias.data[0] = 25.0  # one head's softplus past torch's threshold (20): the identity branch
    return layer.to(device=DEVICE, dtype=dtype)


def _states(dtype: torch.dtype, seed: int) -> StateCache:
    cache = StateCache(StateShape.of(CONFIG.state_layout(), 1), NUM_SLOTS, dtype, torch.device(DEVICE))
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    cache.conv.copy_(torch.randn(cache.conv.shape, generator=gen, device=DEVICE))
    cache.recurrent.copy_(0.1 * torch.randn(cache.recurrent.shape, generator=gen, device=DEVICE))
    return cache


def _run(layer: GatedDeltaNet, kernels: str, x: torch.Tensor, slots: list[int], n: int, seed: int):
    states = _states(x.dtype, seed)
    before = states.conv.clone(), states.recurrent.clone()
    set_recurrent_kernels(layer, kernels, TritonDeltaVerify() if kernels == TRITON else None)
    rows = state_rows(slots, [n] * len(slots), len(slots), [False] * len(slots))
    cu = tuple(range(0, x.shape[0] + 1, n))
    paths = _Paths()
    with torch.no_grad():
        out = layer(x, cu, states, rows, paths)
    assert torch.equal(states.conv, before[0]) and torch.equal(states.recurrent, before[1])  # kept, not written
    kept_conv, kept_rec = states.pending[0]
    return out, kept_conv, kept_rec, paths.taken


@pytest.mark.parametrize("is_split", [False, True], ids=["interleaved", "split"])
@pytest.mark.parametrize("slots, n", [([2], 1), ([4, 0, 2], 1), ([5, 1], 4), ([3, 0, 5], 3)])
def test_fused_verify_layer_matches_the_torch_forms(slots, n, is_split):
    layer = _layer(torch.float32, is_split)
    x = torch.randn(len(slots) * n, HIDDEN, device=DEVICE)
    want, want_conv, want_rec, torch_paths = _run(layer, TORCH, x, slots, n, seed=n)
    got, got_conv, got_rec, paths = _run(layer, TRITON, x, slots, n, seed=n)
    assert TRITON_VERIFY_PATH in paths and TRITON_VERIFY_PATH not in torch_paths
    # The conv state keeps the projected inputs: the fused path projects with the gemv kernel, whose fp32 sum runs
    # in another order than torch's linear (rounding apart; a wrong or shifted row is off by O(1)).
    torch.testing.assert_close(got_conv, want_conv, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got_rec, want_rec, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)


def test_each_kept_state_is_the_one_after_its_token():
    """Position t keeps the state after token t, not before it (the state-fused-kept-shifted mutant's bug would
    sit one row late against the torch forms at every position)."""
    slots, n = [1, 4], 3
    layer = _layer(torch.float32)
    x = torch.randn(len(slots) * n, HIDDEN, device=DEVICE)
    _, _, want_rec, _ = _run(layer, TORCH, x, slots, n, seed=7)
    _, _, got_rec, _ = _run(layer, TRITON, x, slots, n, seed=7)
    by_request = got_rec.view(len(slots), n, -1)
    late = want_rec.view(len(slots), n, -1)[:, :-1]
    assert (by_request[:, 1:] - late).abs().amax() > 1e-2
    torch.testing.assert_close(by_request, want_rec.view(len(slots), n, -1), rtol=2e-5, atol=2e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 rounding as the torch forms: checked on CUDA")
@pytest.mark.parametrize("is_split", [False, True], ids=["interleaved", "split"])
def test_fused_verify_layer_bf16_on_cuda(is_split):
    slots, n = [5, 0, 3, 1], 4
    layer = _layer(torch.bfloat16, is_split)
    x = torch.randn(len(slots) * n, HIDDEN, device=DEVICE, dtype=torch.bfloat16)
    want, want_conv, want_rec, _ = _run(layer, TORCH, x, slots, n, seed=3)
    got, got_conv, got_rec, _ = _run(layer, TRITON, x, slots, n, seed=3)
    torch.testing.assert_close(got_conv, want_conv, rtol=1.6e-2, atol=1e-3)  # gemv vs cuBLAS: a bf16 ulp apart
    torch.testing.assert_close(got_rec, want_rec, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2)  # bf16 roundings apart
