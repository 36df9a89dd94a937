"""The routing kernel with the layer's RMSNorm in its prologue (kernels/moe_route.py RouterNorm) == the norm kernel
(kernels/rms_norm.py, itself tested against the eager norms) followed by the plain routing kernel: the same normed
rows and residual sums, the same experts, weights and sort.

Tiny shapes under the CPU interpreter; 4 splits of the width so every program's RMS pass reads columns it does not
route, and 3 expert blocks so only the first block's programs write the rows (each column once).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),  # the interpreter's padded rows
]

from specbench.kernels.moe_route import RouterTiles, new_router_norm, router_route_sort  # noqa: E402
from specbench.kernels.rms_norm import rms_norm  # noqa: E402
from specbench.models.layers import OffsetRMSNorm, RMSNorm  # noqa: E402
from specbench.models.moe import MoeMLP  # noqa: E402
from specbench.models.moe_config import MoeConfig  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN = 64
SPLIT = RouterTiles(block_h=16, block_e=16)
SORT_FIELDS = ("sorted_slots", "cu_num_slots_per_expert", "active_experts", "num_active_experts")


def route(moe: MoeMLP, x: torch.Tensor, norm=None):
    c = moe.config
    return router_route_sort(
        x, moe.router.weight, moe.router.bias, moe.route_counter, top_k=c.num_experts_per_tok, scoring=c.scoring,
        norm_topk_prob=c.norm_topk_prob, routed_scaling_factor=c.routed_scaling_factor,
        correction_bias=moe.score_correction_bias, is_real_token=None, tiles=SPLIT, norm=norm)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("is_offset", [False, True])
@pytest.mark.parametrize("has_residual", [False, True])
@pytest.mark.parametrize("num_tokens", [1, 5])
def test_norm_in_the_routing_prologue_matches_norm_then_route(dtype, is_offset, has_residual, num_tokens):
    torch.manual_seed(num_tokens + 10 * is_offset + 100 * has_residual)
    moe = MoeMLP(MoeConfig(HIDDEN, 40, 4, 32)).to(DEVICE, dtype)
    norm = (OffsetRMSNorm if is_offset else RMSNorm)(HIDDEN, 1e-6).to(DEVICE, dtype)
    with torch.no_grad():
        norm.weight.normal_(std=0.5 if is_offset else 1.0)
    x = torch.randn(num_tokens, HIDDEN, device=DEVICE).to(dtype) * 3
    residual = torch.randn(num_tokens, HIDDEN, device=DEVICE).to(dtype) if has_residual else None
    want_normed, want_stream = rms_norm(x, norm.weight, norm.eps, residual, is_offset=is_offset)
    want_ids, want_weights, want_order = route(moe, want_normed)

    fused = new_router_norm(norm, x, residual)
    ids, weights, order = route(moe, x, fused)

    if has_residual:
        assert torch.equal(fused.stream, want_stream)  # the same rounded sum
    # The RMS's fp32 sum runs in another order: at most a rounding step of the output dtype apart.
    torch.testing.assert_close(fused.normed, want_normed, rtol=1e-5 if dtype == torch.float32 else 8e-3, atol=1e-6)
    assert torch.equal(ids, want_ids)
    torch.testing.assert_close(weights, want_weights, rtol=1e-4, atol=1e-6)
    for field in SORT_FIELDS:
        assert torch.equal(getattr(order, field), getattr(want_order, field)), field
    assert moe.route_counter.item() == 0


def test_the_norm_changes_the_routing():
    # Guard on the test above: routing the un-normed rows picks other experts here, so a prologue that dropped the
    # norm (or the weight) would fail it.
    torch.manual_seed(0)
    moe = MoeMLP(MoeConfig(HIDDEN, 40, 4, 32)).to(DEVICE)
    norm = RMSNorm(HIDDEN, 1e-6).to(DEVICE)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(5, HIDDEN, device=DEVICE) * 3
    normed_ids = route(moe, x, new_router_norm(norm, x, None))[0]
    assert not torch.equal(normed_ids, route(moe, x)[0])


def test_router_norm_rejects_mismatched_rows():
    moe = MoeMLP(MoeConfig(HIDDEN, 16, 2, 32)).to(DEVICE)
    norm = RMSNorm(HIDDEN, 1e-6).to(DEVICE)
    x = torch.randn(3, HIDDEN, device=DEVICE)
    bad = new_router_norm(norm, x[:2], None)
    with pytest.raises(ValueError, match="norm"):
        route(moe, x, bad)
