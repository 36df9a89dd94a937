"""The one-launch MoE routing (kernels/moe_route.py router_route_sort: router GEMM, top-k, weights, padding mask and
the sort by expert) == the definition: F.linear of the fp32 upcasts, `route` (models/moe_routing.py), the torch sort.

Tiny shapes under the CPU interpreter; small tiles so the router GEMM runs as several programs along both the experts
and the hidden width, and the last of them routes.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    pytest.mark.filterwarnings("ignore:overflow encountered in exp"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),
    pytest.mark.filterwarnings("ignore:All-NaN slice encountered"),
]

from specbench.kernels.moe_route import RouterTiles, router_route_sort  # noqa: E402
from specbench.kernels.moe_sort import sort_by_expert_reference  # noqa: E402
from specbench.models.moe import MoeMLP  # noqa: E402
from specbench.models.moe_config import MoeConfig  # noqa: E402
from specbench.models.moe_routing import route  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN, INTER = 64, 32
ROUTINGS = {
    "softmax-renorm": MoeConfig(HIDDEN, 40, 4, INTER),  # 40 experts: not a multiple of the 16-expert tiles
    "softmax-plain": MoeConfig(HIDDEN, 16, 2, INTER, norm_topk_prob=False),
    "topk_softmax-bias": MoeConfig(HIDDEN, 32, 4, INTER, scoring="topk_softmax", norm_topk_prob=False,
                                   has_router_bias=True),
    "sigmoid-correction-scaled": MoeConfig(HIDDEN, 16, 3, INTER, scoring="sigmoid", has_score_correction_bias=True,
                                           routed_scaling_factor=2.5),
}
SPLIT = RouterTiles(block_h=16, block_e=16)  # 4 splits of the width x 1..3 expert tiles
SORT_FIELDS = ("sorted_slots", "cu_num_slots_per_expert", "active_experts", "num_active_experts")


def layer(config: MoeConfig, seed: int, dtype: torch.dtype = torch.float32) -> MoeMLP:
    torch.manual_seed(seed)
    moe = MoeMLP(config)
    with torch.no_grad():
        if moe.router.bias is not None:
            moe.router.bias.normal_()
        if moe.score_correction_bias is not None:
            moe.score_correction_bias.normal_(std=0.1)
    return moe.to(DEVICE, dtype)


def run(moe: MoeMLP, x: torch.Tensor, is_real: torch.Tensor | None, tiles: RouterTiles | None = SPLIT):
    c = moe.config
    return router_route_sort(
        x, moe.router.weight, moe.router.bias, moe.route_counter, top_k=c.num_experts_per_tok, scoring=c.scoring,
        norm_topk_prob=c.norm_topk_prob, routed_scaling_factor=c.routed_scaling_factor,
        correction_bias=moe.score_correction_bias, is_real_token=is_real, tiles=tiles)


@pytest.mark.parametrize("name", sorted(ROUTINGS))
@pytest.mark.parametrize("num_tokens", [1, 7, 64])
def test_one_launch_routing_matches_the_definition(name, num_tokens):
    # The last quarter of the rows padded with NaN inputs (as stale graph rows may hold): no expert, weight zero.
    config = ROUTINGS[name]
    moe = layer(config, seed=num_tokens)
    gen = torch.Generator(device=DEVICE).manual_seed(num_tokens)
    x = torch.randn(num_tokens, HIDDEN, generator=gen, device=DEVICE)
    num_real = num_tokens - num_tokens // 4
    x[num_real:] = float("nan")
    is_real = torch.arange(num_tokens, device=DEVICE) < num_real
    logits = torch.nn.functional.linear(x, moe.router.weight, moe.router.bias)
    expected = route(config, logits, moe.score_correction_bias, is_real)
    ids, weights, order = run(moe, x, is_real)
    assert torch.equal(ids, expected.topk_ids)
    torch.testing.assert_close(weights, expected.topk_weights, atol=1e-5, rtol=1e-5)
    assert not weights[num_real:].any()
    reference = sort_by_expert_reference(expected.topk_ids, config.num_experts)
    for field in SORT_FIELDS:
        assert torch.equal(getattr(order, field), getattr(reference, field)), field
    assert moe.route_counter.item() == 0  # left ready for the next launch


def test_repeated_launches_agree_and_default_tiles_route_the_same():
    # The counter is reset by each launch's last program: a second launch (a graph replay) routes again, the same.
    moe = layer(ROUTINGS["softmax-renorm"], seed=3)
    x = torch.randn(5, HIDDEN, device=DEVICE)
    first = run(moe, x, None)
    second = run(moe, x, None)
    one_split = run(moe, x, None, tiles=None)  # hidden 64: one program along the width
    for got in (second, one_split):
        assert torch.equal(got[0], first[0])
        torch.testing.assert_close(got[1], first[1], atol=1e-6, rtol=1e-6)
        for field in SORT_FIELDS:
            assert torch.equal(getattr(got[2], field), getattr(first[2], field)), field


@pytest.mark.parametrize("dtype", [torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []), ids=str)
def test_16bit_inputs_route_as_the_fp32_router(dtype):
    # 16-bit products are exact in fp32: the logits are the fp32 router's up to the sum's order, so the experts too
    # (random logits have no near-ties at this tolerance).
    config = ROUTINGS["topk_softmax-bias"]
    moe = layer(config, seed=9, dtype=dtype)
    x = torch.randn(16, HIDDEN, device=DEVICE).to(dtype)
    logits = torch.nn.functional.linear(x.float(), moe.router.weight.float(), moe.router.bias.float())
    expected = route(config, logits, None, None)
    ids, weights, _ = run(moe, x, None)
    assert torch.equal(ids, expected.topk_ids)
    torch.testing.assert_close(weights, expected.topk_weights, atol=1e-5, rtol=1e-4)


def _ranked(scores: list[float], k: int) -> list[int]:
    """The kernels' contract, spelled out: descending score, an exact tie to the lower expert id."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


@pytest.mark.parametrize("name", ["softmax-renorm", "topk_softmax-bias", "sigmoid-correction-scaled"])
@pytest.mark.parametrize("num_tokens", [1, 3])
def test_exact_ties_go_to_the_lower_expert_and_a_padded_token_keeps_slot_order(name, num_tokens):
    # Router rows copied onto other experts give exactly equal logits (and +0.0 against -0.0: equal too), so a
    # choice among equals is decided by the tie rule alone; one token alone is the kernels' one-token sort.
    config = ROUTINGS[name]
    moe = layer(config, seed=5)
    n, k = config.num_experts, config.num_experts_per_tok
    with torch.no_grad():
        w = moe.router.weight
        for dst, src in ((n - 1, 2), (7, 2), (5, 9), (n - 3, 9), (11, 0)):
            w[dst] = w[src]
        if moe.router.bias is not None:
            moe.router.bias.zero_()
        if moe.score_correction_bias is not None:
            moe.score_correction_bias.zero_()
    gen = torch.Generator(device=DEVICE).manual_seed(num_tokens)
    x = torch.randn(num_tokens, HIDDEN, generator=gen, device=DEVICE)
    with torch.no_grad():  # make experts 2 and 9 (and their copies) the best: every one of the k picks has a tie
        for row in (2, 9):
            w[row] = x[0] * (0.08 if row == 2 else 0.06)
        for dst, src in ((n - 1, 2), (7, 2), (5, 9), (n - 3, 9)):
            w[dst] = w[src]
    logits = torch.nn.functional.linear(x, moe.router.weight, moe.router.bias)
    if config.scoring == "sigmoid":
        scores = torch.sigmoid(logits)
    else:
        scores = logits
    ids, _, order = run(moe, x, None)
    for t in range(num_tokens):
        assert ids[t].tolist() == _ranked(scores[t].tolist(), k), t
    assert ids[0, :3].tolist() == [2, 7, n - 1]  # three equal best scores: ascending ids
    assert len(set(scores[0, [2, 7, n - 1]].tolist())) == 1 and scores[0, 2] > scores[0, 9]
    reference = sort_by_expert_reference(ids, n)
    for field in SORT_FIELDS:
        assert torch.equal(getattr(order, field), getattr(reference, field)), field
    # the same token marked padding: no expert, and the sort keeps its slots in order after no real ones
    ids, weights, order = run(moe, x, torch.zeros(num_tokens, dtype=torch.bool, device=DEVICE))
    assert (ids == n).all() and not weights.any()
    assert order.sorted_slots.tolist() == list(range(num_tokens * k))
    assert order.num_active_experts.item() == 0 and not order.cu_num_slots_per_expert.any()
    assert order.active_experts.tolist() == list(range(n))


@pytest.mark.parametrize("scoring", ["topk_softmax", "softmax"])
def test_signed_zeros_tie_and_infinite_logits_rank_last(scoring):
    # Logits straight into the routing kernel: -0.0 and +0.0 compare equal (the lower id first, whichever sign it
    # has), -inf ranks below every finite logit, a NaN below -inf; the weights are the chosen logits' own.
    from specbench.kernels.moe_route import route_and_sort

    inf, nan = float("inf"), float("nan")
    rows = [[-0.0, 0.0, -inf, 1.0, 1.0, -0.0, -2.0, 0.5],
            [nan, -inf, 0.0, -0.0, -inf, -3.0, -0.0, 0.0],
            [-inf, nan, -inf, -inf, -inf, -inf, -inf, -inf]]
    logits = torch.tensor(rows, device=DEVICE)
    ids, weights, _ = route_and_sort(logits, top_k=6, scoring=scoring, norm_topk_prob=False,
                                     routed_scaling_factor=1.0, correction_bias=None, is_real_token=None)
    assert ids[0].tolist() == [3, 4, 7, 0, 1, 5]
    assert ids[1].tolist() == [2, 3, 6, 7, 5, 1]
    assert ids[2].tolist() == [0, 2, 3, 4, 5, 6]  # all -inf: by id; the NaN (expert 1) last of all
    if scoring == "topk_softmax":  # a softmax over the six chosen logits
        expected = torch.softmax(torch.tensor([1.0, 1.0, 0.5, 0.0, 0.0, 0.0]), dim=0)
    else:  # the chosen experts' probabilities over the whole row
        expected = torch.softmax(torch.tensor(rows[0]), dim=0)[[3, 4, 7, 0, 1, 5]]
    torch.testing.assert_close(weights[0].cpu(), expected, atol=1e-6, rtol=1e-6)


def test_layer_fused_route_uses_one_launch_and_keeps_its_counter_across_moves():
    # MoeMLP.fused_route routes as `route`; the counter survives to_empty (uninitialised memory) as zero.
    config = ROUTINGS["sigmoid-correction-scaled"]
    with torch.device("meta"):
        moe = MoeMLP(config)
    moe = moe.to_empty(device=DEVICE)
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_()
        moe.score_correction_bias.normal_(std=0.1)
    assert moe.route_counter.item() == 0 and "route_counter" not in moe.state_dict()
    x = torch.randn(9, HIDDEN, device=DEVICE)
    is_real = torch.arange(9, device=DEVICE) < 6
    routing, order = moe.fused_route(x, is_real)
    expected = moe.route(x, is_real)
    assert torch.equal(routing.topk_ids, expected.topk_ids)
    assert order.cu_num_slots_per_expert[-1].item() == 6 * config.num_experts_per_tok


def test_refuses_a_counter_it_cannot_use():
    moe = layer(ROUTINGS["softmax-plain"], seed=0)
    x = torch.randn(2, HIDDEN, device=DEVICE)
    c = moe.config
    with pytest.raises(ValueError, match="counter"):
        router_route_sort(x, moe.router.weight, None, torch.zeros(1, dtype=torch.int64, device=DEVICE),
                          top_k=c.num_experts_per_tok, scoring=c.scoring, norm_topk_prob=c.norm_topk_prob,
                          routed_scaling_factor=1.0, correction_bias=None, is_real_token=None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs")
def test_graph_replays_route_each_batch_afresh():
    # Captured once, replayed on new inputs and a new padding mask: each replay routes its own batch (the counter is
    # back at zero after every launch), at the Qwen3-30B-A3B router's shape (128 experts, 2048 wide, top 8).
    config = MoeConfig(2048, 128, 8, 64)
    moe = layer(config, seed=1, dtype=torch.bfloat16)
    x = torch.zeros(16, 2048, device=DEVICE, dtype=torch.bfloat16)
    is_real = torch.zeros(16, device=DEVICE, dtype=torch.bool)
    run(moe, x, is_real, tiles=None)  # compile outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ids, weights, order = run(moe, x, is_real, tiles=None)
    for seed in range(3):
        gen = torch.Generator(device=DEVICE).manual_seed(seed)
        x.copy_(torch.randn(16, 2048, generator=gen, device=DEVICE))
        is_real.copy_(torch.arange(16, device=DEVICE) < 10 + seed)
        graph.replay()
        expected = moe.route(x, is_real)
        assert torch.equal(ids, expected.topk_ids), seed
        torch.testing.assert_close(weights, expected.topk_weights, atol=1e-5, rtol=1e-4)
        reference = sort_by_expert_reference(expected.topk_ids, 128)
        for field in SORT_FIELDS:
            assert torch.equal(getattr(order, field), getattr(reference, field)), field
    assert moe.route_counter.item() == 0


@pytest.mark.parametrize("is_gated", [False, True], ids=["ungated", "gated"])
def test_fused_layer_runs_the_shared_expert_as_gemvs(is_gated, monkeypatch):
    # GLM-4.5's ungated shared expert: gate_up + SiLU-and-mul and down + the routed sum as two gemvs; Qwen2-MoE's
    # and Qwen3-Next's sigmoid-gated one: those two and the gate's one-row projection as gemvs. Either way the
    # output is the reference layer's.
    from specbench.models import fused_kernels

    config = MoeConfig(HIDDEN, 8, 2, INTER, scoring="sigmoid", has_score_correction_bias=True,
                       routed_scaling_factor=2.5, shared_intermediate_size=48, is_shared_expert_gated=is_gated)
    moe = layer(config, seed=4)
    with torch.no_grad():
        for p in moe.shared_expert.parameters():
            p.normal_(std=0.2)
    calls = []
    real = fused_kernels.gemv
    monkeypatch.setattr(fused_kernels, "gemv", lambda x, w, **kw: calls.append(tuple(w.shape)) or real(x, w, **kw))
    x = torch.randn(5, HIDDEN, device=DEVICE)
    got = moe(x, is_fused=True)
    assert calls == [(96, HIDDEN), (HIDDEN, 48)] + ([(1, HIDDEN)] if is_gated else [])
    torch.testing.assert_close(got, moe(x), atol=1e-5, rtol=1e-5)


def test_routing_warps_follow_the_measured_tiles():
    # H100 winners (routing_warps' docstring): one warp for one token's narrow tile, 8 then 16 warps as the
    # 512-expert tile grows, the 16-a-thread rule for 128 experts past one token.
    from specbench.kernels.moe_route import routing_warps

    assert routing_warps(1, 128) == 1 and routing_warps(1, 32) == 1
    assert routing_warps(1, 512) == 4 and routing_warps(4, 512) == 8 and routing_warps(16, 512) == 16
    assert routing_warps(4, 128) == 4 and routing_warps(64, 128) == 16
