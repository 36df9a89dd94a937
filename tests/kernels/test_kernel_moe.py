"""The MoE layer's fused path (router kernel, routing + sort in one launch, the expert kernels) == its torch reference
(specbench/models/moe.py); the sort and routing kernels == their torch definitions. The expert kernels alone, under
every tile kind: tests/kernels/test_kernel_moe_gemv.py.

fp32 under the CPU interpreter (the kernels differ from the reference only by the GEMMs' summation order), fp16
there too, bf16 on CUDA. Padded rows of a graph batch must not change a single bit of the real rows.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    pytest.mark.filterwarnings("ignore:overflow encountered in exp"),
    # The interpreter's numpy on padded rows of NaN / -inf logits (the kernels mask those rows' results).
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),
    pytest.mark.filterwarnings("ignore:All-NaN slice encountered"),
]

from specbench.kernels.moe_gemv import MAX_TOKENS
from specbench.kernels.moe_sort import sort_by_expert, sort_by_expert_reference

from specbench.models.moe import MoeMLP
from specbench.models.moe_config import MoeConfig
from specbench.models.moe_routing import ExpertRouting

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN, NUM_EXPERTS, TOP_K, INTER = 64, 8, 2, 48  # INTER off the tile sizes: masked tails
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}

CONFIGS = {
    "qwen3": MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER),
    "gpt-oss": MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="topk_softmax", norm_topk_prob=False,
                         has_router_bias=True, has_expert_bias=True, activation="swiglu_oai"),
    "glm4": MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, scoring="sigmoid", has_score_correction_bias=True,
                      routed_scaling_factor=2.5, shared_intermediate_size=32),
}


def layer(name: str, dtype: torch.dtype, seed: int = 0) -> MoeMLP:
    torch.manual_seed(seed)
    moe = MoeMLP(CONFIGS[name])
    with torch.no_grad():
        if moe.gate_up_bias is not None:
            moe.gate_up_bias.normal_()
            moe.down_bias.normal_()
            moe.gate_up_weight.mul_(4.0)  # pre-activations past the swiglu limit
        if moe.score_correction_bias is not None:
            moe.score_correction_bias.normal_(std=0.1)
    return moe.to(DEVICE, dtype)


def x_for(num_tokens: int, dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(num_tokens, HIDDEN, generator=gen, device=DEVICE).to(dtype)


def assert_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype and not got.isnan().any()
    tol = TOL[got.dtype]
    torch.testing.assert_close(got.float(), expected.float(), atol=tol * expected.float().abs().max().item(), rtol=tol)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("num_tokens", [1, 3, 16, 64])
def test_fused_matches_reference_fp32(name, num_tokens):
    moe = layer(name, torch.float32)
    x = x_for(num_tokens, torch.float32)
    routing = moe.route(x)
    expected = moe.reference_experts(x, routing)
    assert_close(moe.fused_experts(x, routing), expected)
    assert_close(moe(x, is_fused=True), moe(x))  # with the shared expert, where there is one


@pytest.mark.parametrize("dtype", [torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []), ids=str)
@pytest.mark.parametrize("num_tokens", [1, 16, 64])
def test_fused_matches_reference_16bit(dtype, num_tokens):
    for name in ("qwen3", "gpt-oss"):
        moe = layer(name, dtype)
        x = x_for(num_tokens, dtype)
        routing = moe.route(x)
        assert_close(moe.fused_experts(x, routing), moe.reference_experts(x, routing))


@pytest.mark.parametrize("name", ["qwen3", "gpt-oss"])
def test_padded_rows_never_touch_real_rows(name):
    # A 16-row graph batch with 5 real tokens; the padded rows hold NaN and huge values, as stale graph inputs may.
    moe = layer(name, torch.float32)
    num_real = 5
    x = x_for(16, torch.float32, seed=7)
    x[num_real:num_real + 5] = float("nan")
    x[num_real + 5:] = 1e30
    is_real = torch.arange(16, device=DEVICE) < num_real
    routing = moe.route(x, is_real)
    order = sort_by_expert(routing.topk_ids, NUM_EXPERTS)
    # The same routing, less the padded rows: the kernels' outputs may then differ in no bit (the router GEMM
    # is left out of the comparison; cuBLAS may sum a 5-row product in another order than a 16-row one).
    alone = ExpertRouting(topk_ids=routing.topk_ids[:num_real], topk_weights=routing.topk_weights[:num_real])
    # Padded rows wake no expert and own no slot in any expert's range.
    assert order.num_active_experts.item() == sort_by_expert(alone.topk_ids, NUM_EXPERTS).num_active_experts.item()
    assert order.cu_num_slots_per_expert[-1].item() == num_real * TOP_K
    padded = moe.fused_experts(x, routing)
    assert torch.equal(padded[:num_real], moe.fused_experts(x[:num_real], alone))  # bit for bit
    assert (padded[num_real:] == 0).all()
    assert_close(moe(x, is_real, is_fused=True)[:num_real], moe(x[:num_real], is_fused=True))


def test_the_layer_refuses_more_tokens_than_the_kernels_take():
    moe = layer("qwen3", torch.float32)
    x = x_for(MAX_TOKENS + 1, torch.float32)
    with pytest.raises(ValueError, match="at most"):
        moe.fused_experts(x, moe.route(x))


@pytest.mark.parametrize("num_experts, top_k", [(8, 2), (128, 8), (32, 4), (6, 3)])
@pytest.mark.parametrize("num_tokens", [1, 5, 16, 64])
def test_sort_kernel_matches_the_torch_sort(num_experts, top_k, num_tokens):
    # Random distinct ids per token (some tokens share experts), the last rows padded as in a graph batch.
    gen = torch.Generator().manual_seed(num_tokens * 131 + num_experts)
    ids = torch.stack([torch.randperm(num_experts, generator=gen)[:top_k] for _ in range(num_tokens)])
    if num_experts == 128:  # few experts in play: long ranges and many idle experts
        ids = torch.stack([torch.randperm(12, generator=gen)[:top_k] * 10 for _ in range(num_tokens)])
    ids[num_tokens - num_tokens // 4:] = num_experts
    ids = ids.to(DEVICE)
    got, expected = sort_by_expert(ids, num_experts), sort_by_expert_reference(ids, num_experts)
    for field in ("sorted_slots", "cu_num_slots_per_expert", "active_experts", "num_active_experts"):
        a, b = getattr(got, field), getattr(expected, field)
        assert a.dtype == b.dtype == torch.int32 and torch.equal(a, b), (field, a, b)


ROUTINGS = {
    "softmax-norm": MoeConfig(HIDDEN, 128, 8, INTER),
    "softmax": MoeConfig(HIDDEN, NUM_EXPERTS, TOP_K, INTER, norm_topk_prob=False),
    "topk_softmax": MoeConfig(HIDDEN, 32, 4, INTER, scoring="topk_softmax", norm_topk_prob=False,
                              has_router_bias=True),
    "sigmoid-bias-scaled": MoeConfig(HIDDEN, 16, 3, INTER, scoring="sigmoid", has_score_correction_bias=True,
                                     routed_scaling_factor=2.5),
}


@pytest.mark.parametrize("name", sorted(ROUTINGS))
@pytest.mark.parametrize("num_tokens", [1, 7, 64])
def test_route_kernel_matches_route_then_sort(name, num_tokens):
    # The one-kernel routing + sort (kernels/moe_route.py) against the definition: route (moe_routing.py), then the
    # torch sort; the last rows padded (NaN inputs, as stale graph rows may hold).
    from specbench.kernels.moe_route import route_and_sort

    from specbench.models.moe_routing import route

    config = ROUTINGS[name]
    torch.manual_seed(num_tokens)
    moe = MoeMLP(config).to(DEVICE)
    if moe.score_correction_bias is not None:
        moe.score_correction_bias.normal_(std=0.1)
    x = x_for(num_tokens, torch.float32, seed=num_tokens)
    num_real = num_tokens - num_tokens // 4
    x[num_real:] = float("nan")
    is_real = torch.arange(num_tokens, device=DEVICE) < num_real
    logits = torch.nn.functional.linear(x, moe.router.weight, moe.router.bias)
    expected = route(config, logits, moe.score_correction_bias, is_real)
    ids, weights, order = route_and_sort(
        logits, top_k=config.num_experts_per_tok, scoring=config.scoring, norm_topk_prob=config.norm_topk_prob,
        routed_scaling_factor=config.routed_scaling_factor, correction_bias=moe.score_correction_bias,
        is_real_token=is_real)
    assert torch.equal(ids, expected.topk_ids)
    torch.testing.assert_close(weights, expected.topk_weights, atol=1e-6, rtol=1e-5)
    assert not weights[num_real:].any()
    reference = sort_by_expert_reference(expected.topk_ids, config.num_experts)
    for field in ("sorted_slots", "cu_num_slots_per_expert", "active_experts", "num_active_experts"):
        assert torch.equal(getattr(order, field), getattr(reference, field)), field


@pytest.mark.parametrize("name", ["qwen3", "gpt-oss", "glm4"])
def test_fused_forward_routes_in_one_kernel_and_matches_reference(name):
    # MoeMLP(is_fused=True) routes with the kernel; its output equals the reference path's within the tolerance.
    moe = layer(name, torch.float32)
    x = x_for(16, torch.float32, seed=3)
    is_real = torch.arange(16, device=DEVICE) < 11
    routing, order = moe.fused_route(x, is_real)
    assert torch.equal(routing.topk_ids, moe.route(x, is_real).topk_ids)
    assert order.cu_num_slots_per_expert[-1].item() == 11 * TOP_K
    assert_close(moe(x, is_real, is_fused=True)[:11], moe(x, is_real)[:11])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []),
                         ids=str)
@pytest.mark.parametrize("num_tokens", [1, 16, 64])
def test_router_kernel_matches_the_fp32_router(dtype, num_tokens):
    # The router GEMM in one kernel == F.linear of the fp32 upcasts (up to the sum's order); bias and 100 experts
    # (not a multiple of the kernel's 16-expert tiles) included.
    from specbench.kernels.moe_route import router_logits

    moe = MoeMLP(MoeConfig(HIDDEN, 100, 4, INTER, scoring="topk_softmax", norm_topk_prob=False,
                           has_router_bias=True)).to(DEVICE, dtype)
    with torch.no_grad():
        moe.router.bias.normal_()
    x = x_for(num_tokens, dtype, seed=5)
    expected = torch.nn.functional.linear(x.float(), moe.router.weight.float(), moe.router.bias.float())
    got = router_logits(x, moe.router.weight, moe.router.bias)
    assert got.dtype == torch.float32 and got.shape == (num_tokens, 100)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
