"""Fused routed experts (kernels/moe.py) == the MoE layer's torch reference (specbench/models/moe.py).

fp32 under the CPU interpreter (the kernels differ from the reference only by the GEMMs' summation order), fp16
there too, bf16 on CUDA. Padded rows of a graph batch must not change a single bit of the real rows.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    pytest.mark.filterwarnings("ignore:overflow encountered in exp"),
    # The interpreter's numpy on padded rows of NaN / -inf logits (the kernels mask those rows' results).
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),
    pytest.mark.filterwarnings("ignore:All-NaN slice encountered"),
]

from specbench.kernels.moe import (  # noqa: E402
    MAX_TOKENS,
    MoeKernelConfig,
    fused_experts,
    sort_by_expert,
    sort_by_expert_reference,
)
from specbench.models.moe import MoeMLP  # noqa: E402
from specbench.models.moe_config import MoeConfig  # noqa: E402
from specbench.models.moe_routing import ExpertRouting  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN, NUM_EXPERTS, TOP_K, INTER = 64, 8, 2, 48  # INTER off the tile sizes: masked tails
# Small tiles: several programs per expert and several K steps; 16 rows per step so an expert's range is walked in
# more than one step at 64 tokens.
SMALL = MoeKernelConfig(block_m=16, block_n_gate_up=16, block_n_down=16, block_k=32)
WIDE_ROWS = MoeKernelConfig(block_m=64, block_n_gate_up=16, block_n_down=16, block_k=32)
SPLIT_DOWN = MoeKernelConfig(block_m=16, block_n_gate_up=16, block_n_down=16, block_k=32, down_split=4)
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
    if num_tokens < 16:  # the default tiles too (one program per expert and tile of the small widths)
        assert_close(fused_experts(x, routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight,
                                   gate_up_bias=moe.gate_up_bias, down_bias=moe.down_bias,
                                   is_swiglu_oai=name == "gpt-oss", config=SMALL), expected)
    assert_close(moe(x, is_fused=True), moe(x))  # with the shared expert, where there is one


@pytest.mark.parametrize("dtype", [torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []), ids=str)
@pytest.mark.parametrize("num_tokens", [1, 16, 64])
def test_fused_matches_reference_16bit(dtype, num_tokens):
    for name in ("qwen3", "gpt-oss"):
        moe = layer(name, dtype)
        x = x_for(num_tokens, dtype)
        routing = moe.route(x)
        assert_close(moe.fused_experts(x, routing), moe.reference_experts(x, routing))


def _fixed_routing(num_tokens: int, experts: list[int]) -> ExpertRouting:
    """Every token routed to the same `experts` (so the others get no token), weights of varied size."""
    ids = torch.tensor(experts, device=DEVICE).repeat(num_tokens, 1)
    weights = torch.rand(num_tokens, len(experts), generator=torch.Generator(device=DEVICE).manual_seed(0),
                         device=DEVICE)
    return ExpertRouting(topk_ids=ids, topk_weights=weights)


@pytest.mark.parametrize("tiles", [SMALL, WIDE_ROWS], ids=["16-rows", "64-rows"])
@pytest.mark.parametrize("num_tokens", [1, 17, 64])
def test_experts_without_tokens_and_experts_with_many(num_tokens, tiles):
    # Experts 0, 2, 3, 4, 6 get nothing; 5 and 7 get every token (64 rows: four 16-row steps of one range, or one).
    moe = layer("gpt-oss", torch.float32)
    x = x_for(num_tokens, torch.float32, seed=4)
    routing = _fixed_routing(num_tokens, [7, 5])
    order = sort_by_expert(routing.topk_ids, NUM_EXPERTS)
    assert order.num_active_experts.item() == 2
    assert order.active_experts[:2].tolist() == [5, 7]
    assert order.cu_num_slots_per_expert.tolist() == [0] * 6 + [num_tokens] * 2 + [2 * num_tokens]
    got = fused_experts(x, routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight,
                        gate_up_bias=moe.gate_up_bias, down_bias=moe.down_bias, is_swiglu_oai=True, config=tiles)
    assert_close(got, moe.reference_experts(x, routing))


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


def test_a_token_overflow_stays_in_its_row():
    # One real token's inf output must not reach the other tokens sharing its experts (no 0 * inf in the combine).
    moe = layer("qwen3", torch.float32)
    x = x_for(4, torch.float32, seed=9)
    routing = _fixed_routing(4, [1, 2])
    x[2] = 1e30
    got = fused_experts(x, routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight, config=SMALL)
    assert not got[2].isfinite().all()
    assert got[[0, 1, 3]].isfinite().all()
    assert_close(got[[0, 1, 3]], moe.reference_experts(x, routing)[[0, 1, 3]])


def test_refuses_what_it_cannot_do():
    moe = layer("qwen3", torch.float32)
    x = x_for(MAX_TOKENS + 1, torch.float32)
    routing = moe.route(x)
    with pytest.raises(ValueError, match="at most"):
        moe.fused_experts(x, routing)
    with pytest.raises(ValueError, match="contiguous"):
        fused_experts(x[:2], routing.topk_ids[:2], routing.topk_weights[:2], moe.gate_up_weight,
                      moe.down_weight.transpose(1, 2).contiguous().transpose(1, 2))
    with pytest.raises(ValueError, match="powers of two"):
        fused_experts(x[:2], routing.topk_ids[:2], routing.topk_weights[:2], moe.gate_up_weight, moe.down_weight,
                      config=MoeKernelConfig(block_m=8, block_n_gate_up=16, block_n_down=16, block_k=32))
    with pytest.raises(ValueError, match="both expert biases"):
        fused_experts(x[:2], routing.topk_ids[:2], routing.topk_weights[:2], moe.gate_up_weight, moe.down_weight,
                      gate_up_bias=torch.zeros(NUM_EXPERTS, 2 * INTER, device=DEVICE))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graph_replays_with_fewer_real_rows():
    # One graph captured at 16 rows, replayed with 16, 5 and 1 real rows and NaN in the rest (stale inputs).
    moe = layer("qwen3", torch.bfloat16)
    num_rows = 16
    static_x = torch.zeros(num_rows, HIDDEN, device=DEVICE, dtype=torch.bfloat16)
    static_is_real = torch.ones(num_rows, device=DEVICE, dtype=torch.bool)
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            moe(static_x, static_is_real, is_fused=True)  # compiles outside the capture
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = moe(static_x, static_is_real, is_fused=True)
        for num_real in (16, 5, 1):
            x = x_for(num_real, torch.bfloat16, seed=num_real)
            static_x.fill_(float("nan"))
            static_x[:num_real] = x
            static_is_real.copy_(torch.arange(num_rows, device=DEVICE) < num_real)
            graph.replay()
            assert_close(static_out[:num_real].clone(), moe(x))
            assert (static_out[num_real:] == 0).all()


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


@pytest.mark.parametrize("name", ["qwen3", "gpt-oss"])
@pytest.mark.parametrize("num_tokens", [1, 3, 17, 64])
def test_split_down_matches_reference_and_keeps_padded_rows_apart(name, num_tokens):
    # Split over the active experts: more splits than active experts (1 token: 2 experts, 4 splits) leaves some
    # programs without an expert, whose zero partial sums must add nothing.
    moe = layer(name, torch.float32)
    x = x_for(num_tokens, torch.float32, seed=11)
    routing = moe.route(x)
    args = (routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight)
    kwargs = {"gate_up_bias": moe.gate_up_bias, "down_bias": moe.down_bias, "is_swiglu_oai": name == "gpt-oss"}
    split = fused_experts(x, *args, config=SPLIT_DOWN, **kwargs)
    assert_close(split, moe.reference_experts(x, routing))
    assert torch.equal(split, fused_experts(x, *args, config=SPLIT_DOWN, **kwargs))  # deterministic
    if num_tokens >= 3:  # two padded rows of NaN: the real rows' outputs keep every bit
        is_real = torch.arange(num_tokens, device=DEVICE) < num_tokens - 2
        x_padded = x.clone()
        x_padded[~is_real] = float("nan")
        padded = moe.route(x_padded, is_real)
        got = fused_experts(x_padded, padded.topk_ids, padded.topk_weights, *args[2:], config=SPLIT_DOWN, **kwargs)
        alone = fused_experts(x[is_real], routing.topk_ids[is_real], routing.topk_weights[is_real], *args[2:],
                              config=SPLIT_DOWN, **kwargs)
        assert torch.equal(got[is_real], alone) and (got[~is_real] == 0).all()


def test_default_tiles_by_batch_size():
    from specbench.kernels.moe import default_config

    one = default_config(2, num_tokens=1, num_experts=128)
    assert one.down_split == 8 and one.block_k == 256 and one.block_n_gate_up == 16
    assert default_config(2, num_tokens=64, num_experts=128).block_k == 128
    assert default_config(4, num_tokens=16, num_experts=32).block_k == 128
    assert default_config(2, num_tokens=1, num_experts=6).down_split == 4  # a power of two
    # The split never depends on the batch: a padded graph batch sums over experts as its real rows do.
    assert {default_config(2, n, 32).down_split for n in (1, 3, 16, 17, 64)} == {8}


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
