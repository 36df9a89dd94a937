"""The expert kernels of decode and verify batches (kernels/moe_gemv.py) == the MoE layer's torch reference
(specbench/models/moe.py), with their tiles (kernels/moe_tiles.py).

fp32 under the CPU interpreter (the kernels differ from the reference only by summation orders), at tiny shapes with
small tiles so that every loop runs more than once and every tile has a masked tail; the real Qwen3-30B-A3B and
gpt-oss-20b shapes in bf16 on CUDA. Same inputs give the same bits; padded rows of a graph batch change no bit of
the real rows.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    # The interpreter's numpy on a token of 1e30 (its overflow is the point of the test).
    pytest.mark.filterwarnings("ignore:overflow encountered in exp"),
    pytest.mark.filterwarnings("ignore:overflow encountered in multiply"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in matmul"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in reduce"),
    # The routing kernel's numpy softmax over masked (-inf) lanes (kernels/moe_route.py masks their results).
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),
]

from specbench.kernels.moe_gemv import MAX_TOKENS, expert_gemv
from specbench.kernels.moe_sort import sort_by_expert
from specbench.kernels.moe_tiles import (
    TUNED,
    ExpertTiles,
    ProjectionTiles,
    default_tiles,
    heuristic_tiles,
    token_bucket,
)

from specbench.perf.moe_shapes import real_shapes
from specbench.models.moe import MoeMLP
from specbench.models.moe_config import MoeConfig
from specbench.models.moe_routing import ExpertRouting

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN, INTER = 64, 48  # INTER off the tile sizes: masked tails

CONFIGS = {
    "softmax-renorm": MoeConfig(HIDDEN, 8, 2, INTER),  # Qwen3-MoE
    "softmax": MoeConfig(HIDDEN, 6, 3, INTER, norm_topk_prob=False),
    "gpt-oss": MoeConfig(HIDDEN, 8, 2, INTER, scoring="topk_softmax", norm_topk_prob=False, has_router_bias=True,
                         has_expert_bias=True, activation="swiglu_oai"),
    "sigmoid-shared": MoeConfig(HIDDEN, 8, 2, INTER, scoring="sigmoid", has_score_correction_bias=True,
                                routed_scaling_factor=2.5, shared_intermediate_size=32),  # GLM-4.5
}
# Tensor-core tiles: 16 rows a program (several programs per expert), 32-wide K steps (several, a masked tail).
DOT = ProjectionTiles(is_dot=True, block_n=16, block_k=32)
WIDE_DOT = ProjectionTiles(is_dot=True, block_n=32, block_k=64, block_m=32)
# CUDA-core tiles: 4 gate_up rows, 2 down rows a program, K in steps of 32 / 16.
CORES_GATE_UP = ProjectionTiles(is_dot=False, block_n=4, block_k=32, num_warps=4)
CORES_DOWN = ProjectionTiles(is_dot=False, block_n=2, block_k=16, num_warps=4)
TILES = {
    "dot": ExpertTiles(DOT, DOT),
    "cores": ExpertTiles(CORES_GATE_UP, CORES_DOWN),
    "cores-then-dot": ExpertTiles(CORES_GATE_UP, DOT),
    "dot-then-cores": ExpertTiles(DOT, CORES_DOWN),
    "wide-dot": ExpertTiles(WIDE_DOT, WIDE_DOT),  # 64 rows: not worth the interpreter's time below that
}
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


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


def x_for(num_tokens: int, dtype: torch.dtype, seed: int = 1, hidden: int = HIDDEN) -> torch.Tensor:
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(num_tokens, hidden, generator=gen, device=DEVICE).to(dtype)


def run(moe: MoeMLP, x: torch.Tensor, routing: ExpertRouting, tiles: ExpertTiles | None = None) -> torch.Tensor:
    return expert_gemv(x, routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight,
                       gate_up_bias=moe.gate_up_bias, down_bias=moe.down_bias,
                       is_swiglu_oai=moe.config.activation == "swiglu_oai", swiglu_alpha=moe.config.swiglu_alpha,
                       swiglu_limit=moe.config.swiglu_limit, tiles=tiles)


def assert_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype and not got.isnan().any()
    tol = TOL[got.dtype]
    torch.testing.assert_close(got.float(), expected.float(), atol=tol * expected.float().abs().max().item(), rtol=tol)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("num_tokens", [1, 3, 17, 64])
def test_matches_reference_fp32(name, num_tokens):
    moe = layer(name, torch.float32)
    x = x_for(num_tokens, torch.float32, seed=num_tokens)
    routing = moe.route(x)
    expected = moe.reference_experts(x, routing)
    # Every kind at one token (its own kernels) and at 3 (the grouped ones; the interpreter is slow on CUDA-core
    # tiles at more tokens); the wide tiles where 64 rows fill them.
    narrow = [name for name in TILES if name != "wide-dot"]
    tiles = {1: narrow, 3: narrow, 17: ["dot"], 64: ["dot", "wide-dot"]}[num_tokens]
    for tile_name in tiles:
        assert_close(run(moe, x, routing, TILES[tile_name]), expected)
    got = run(moe, x, routing)  # the default tiles of this batch
    assert_close(got, expected)
    assert torch.equal(got, run(moe, x, routing))  # deterministic
    if num_tokens < 64:  # the layer: router kernel, shared expert where there is one
        assert_close(moe(x, is_fused=True), moe(x))


@pytest.mark.parametrize("num_tokens", [1, 16])
def test_matches_reference_fp16(num_tokens):
    for name in ("softmax-renorm", "gpt-oss"):
        moe = layer(name, torch.float16)
        x = x_for(num_tokens, torch.float16)
        routing = moe.route(x)
        assert_close(run(moe, x, routing), moe.reference_experts(x, routing))


def _fixed_routing(num_tokens: int, experts: list[int]) -> ExpertRouting:
    """Every token routed to the same `experts` (so the others get no token), weights of varied size."""
    ids = torch.tensor(experts, device=DEVICE).repeat(num_tokens, 1)
    weights = torch.rand(num_tokens, len(experts), generator=torch.Generator(device=DEVICE).manual_seed(0),
                         device=DEVICE)
    return ExpertRouting(topk_ids=ids, topk_weights=weights)


@pytest.mark.parametrize("tile_name, num_tokens", [("dot", 40), ("wide-dot", 40), ("cores", 6)])
def test_experts_with_many_tokens_and_experts_with_none(tile_name, num_tokens):
    # Every token on experts 7 and 5: at 40 tokens each expert's range is three 16-row steps (two 32-row ones); on
    # the CUDA cores, 6 one-token passes over each tile. The other six experts get nothing and their programs exit.
    moe = layer("gpt-oss", torch.float32)
    x = x_for(num_tokens, torch.float32, seed=4)
    routing = _fixed_routing(num_tokens, [7, 5])
    assert sort_by_expert(routing.topk_ids, 8).num_active_experts.item() == 2
    assert_close(run(moe, x, routing, TILES[tile_name]), moe.reference_experts(x, routing))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax-renorm", "gpt-oss"])
@pytest.mark.parametrize("num_rows, num_real, tile_name", [(16, 5, None), (4, 1, None), (16, 5, "cores")])
def test_padded_rows_never_touch_real_rows(name, num_rows, num_real, tile_name):
    # A graph batch with stale rows (NaN and huge values): the real rows' outputs keep every bit of the same
    # routing without the padded rows (the same tiles: the padded batch's bucket's), and padded rows come out zero.
    moe = layer(name, torch.float32)
    x = x_for(num_rows, torch.float32, seed=7)
    x[num_real:] = float("nan")
    x[num_rows - 1] = 1e30
    is_real = torch.arange(num_rows, device=DEVICE) < num_real
    routing = moe.route(x, is_real)
    alone = ExpertRouting(topk_ids=routing.topk_ids[:num_real], topk_weights=routing.topk_weights[:num_real])
    tiles = TILES[tile_name] if tile_name else default_tiles(num_rows, HIDDEN, INTER, 4)
    padded = run(moe, x, routing, tiles)
    assert torch.equal(padded[:num_real], run(moe, x[:num_real], alone, tiles))
    assert (padded[num_real:] == 0).all()


def test_a_padded_single_row_reads_no_expert():
    # One token, padded (a graph of one row replayed with none real): ids num_experts, zero output, no NaN.
    moe = layer("gpt-oss", torch.float32)
    x = torch.full((1, HIDDEN), float("nan"), device=DEVICE)
    routing = moe.route(x, torch.zeros(1, dtype=torch.bool, device=DEVICE))
    for tile_name in ("cores", "dot"):
        assert (run(moe, x, routing, TILES[tile_name]) == 0).all()


@pytest.mark.parametrize("tile_name", ["dot", "cores"])
def test_a_token_overflow_stays_in_its_row(tile_name):
    # One real token's inf output must not reach the others sharing its experts.
    moe = layer("softmax-renorm", torch.float32)
    x = x_for(4, torch.float32, seed=9)
    routing = _fixed_routing(4, [1, 2])
    x[2] = 1e30
    got = run(moe, x, routing, TILES[tile_name])
    assert not got[2].isfinite().all()
    assert got[[0, 1, 3]].isfinite().all()
    assert_close(got[[0, 1, 3]], moe.reference_experts(x, routing)[[0, 1, 3]])


def test_refuses_what_it_cannot_do():
    moe = layer("softmax-renorm", torch.float32)
    x = x_for(MAX_TOKENS + 1, torch.float32)
    routing = moe.route(x)
    two = ExpertRouting(routing.topk_ids[:2], routing.topk_weights[:2])
    with pytest.raises(ValueError, match="at most"):
        run(moe, x, routing)
    with pytest.raises(ValueError, match="at least 16"):
        run(moe, x[:2], two, ExpertTiles(ProjectionTiles(is_dot=True, block_n=8, block_k=32), DOT))
    with pytest.raises(ValueError, match="powers of two"):
        run(moe, x[:2], two, ExpertTiles(DOT, ProjectionTiles(is_dot=True, block_n=16, block_k=48)))
    with pytest.raises(ValueError, match="contiguous"):
        expert_gemv(x[:2], two.topk_ids, two.topk_weights, moe.gate_up_weight,
                    moe.down_weight.transpose(1, 2).contiguous().transpose(1, 2))
    with pytest.raises(ValueError, match="both expert biases"):
        expert_gemv(x[:2], two.topk_ids, two.topk_weights, moe.gate_up_weight, moe.down_weight,
                    gate_up_bias=torch.zeros(8, 2 * INTER, device=DEVICE))


def test_tiles_by_token_bucket():
    assert [token_bucket(n) for n in (1, 2, 4, 5, 16, 17, 64)] == [1, 4, 4, 16, 16, 64, 64]
    with pytest.raises(ValueError, match="at most 64"):
        token_bucket(65)
    # The heuristic (what a shape without TUNED entries gets):
    one = heuristic_tiles(1, 2048, 768)
    assert not one.gate_up.is_dot and not one.down.is_dot
    assert one.gate_up.block_k == 2048 and one.down.block_k == 1024  # the whole row a step, up to 2048
    assert all(t.is_dot for t in (heuristic_tiles(4, 2048, 768).gate_up, heuristic_tiles(64, 2880, 2880).down))
    # fp32: tensor-core K steps of the same bytes; CUDA-core tiles unchanged.
    assert default_tiles(16, 2048, 1536, 4).gate_up.block_k == default_tiles(16, 2048, 1536).gate_up.block_k // 2
    assert default_tiles(1, 2048, 1536, 4) == default_tiles(1, 2048, 1536)  # (2048, 1536): not in TUNED
    # Every batch of a bucket gets the bucket's tiles (a padded graph batch sums as its real rows alone do).
    assert len({default_tiles(n, 2880, 2880) for n in range(5, 17)}) == 1
    assert len({default_tiles(n, 1000, 1000) for n in range(5, 17)}) == 1


@pytest.mark.parametrize("key", sorted(TUNED))
def test_shipped_tuned_tiles_match_reference(key):
    # Each TUNED entry is a legal tile pair that computes the layer at its bucket's batch size; here at tiny shapes in
    # fp32 (block_k is capped at the input width), at real shapes on CUDA by test_real_shapes_match_reference_on_cuda.
    _hidden, _inter, bucket = key
    name = "gpt-oss" if key[0] == 2880 else "softmax-renorm"
    moe = layer(name, torch.float32)
    x = x_for(min(bucket, 5), torch.float32, seed=bucket)  # past 5 tokens the interpreter only repeats the same loops
    routing = moe.route(x)
    assert_close(run(moe, x, routing, TUNED[key]), moe.reference_experts(x, routing))


def test_tuned_tiles_win_over_the_heuristic(monkeypatch):
    tuned = ExpertTiles(WIDE_DOT, DOT)
    monkeypatch.setitem(TUNED, (1000, 1000, 16), tuned)  # a shape of its own: the shipped entries stay as they are
    assert default_tiles(9, 1000, 1000) == tuned
    assert default_tiles(9, 1000, 2000) == heuristic_tiles(16, 1000, 2000)


REAL_SHAPES = real_shapes()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="real shapes: CUDA only")
@pytest.mark.parametrize("shape", sorted(REAL_SHAPES))
def test_real_shapes_match_reference_on_cuda(shape):
    # bf16 at the benchmark's shapes: the default tiles of every bucket and the heuristic ones (TUNED may differ),
    # against the reference, twice (the same bits), and the padded-row property at 16 rows. The routing is the
    # reference's for both (the router kernel could flip a near-tie among 128 experts).
    config = REAL_SHAPES[shape]
    torch.manual_seed(0)
    with torch.device("cuda"):  # initialised on the GPU: 0.6-0.8 G parameters
        moe = MoeMLP(config).to(torch.bfloat16)
    with torch.no_grad():
        if moe.gate_up_bias is not None:
            moe.gate_up_bias.normal_(std=0.5)
            moe.down_bias.normal_(std=0.5)
    hidden, inter = config.hidden_size, config.moe_intermediate_size
    with torch.no_grad():
        for num_tokens in (1, 2, 4, 16, 33, 64):
            x = x_for(num_tokens, torch.bfloat16, seed=num_tokens, hidden=hidden)
            routing = moe.route(x)
            expected = moe.reference_experts(x, routing)
            bucket = token_bucket(num_tokens)
            for tiles in dict.fromkeys([default_tiles(num_tokens, hidden, inter),
                                        heuristic_tiles(bucket, hidden, inter)]):
                got = run(moe, x, routing, tiles)
                assert_close(got, expected)
                assert torch.equal(got, run(moe, x, routing, tiles)), (num_tokens, tiles)
        x = x_for(16, torch.bfloat16, seed=3, hidden=hidden)
        x[5:] = float("nan")
        is_real = torch.arange(16, device="cuda") < 5
        routing = moe.route(x, is_real)
        alone = ExpertRouting(routing.topk_ids[:5], routing.topk_weights[:5])
        padded = run(moe, x, routing)
        assert torch.equal(padded[:5], run(moe, x[:5], alone)) and (padded[5:] == 0).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graph_replays_with_fewer_real_rows():
    # One graph captured at 16 rows, replayed with 16, 5 and 1 real rows and NaN in the rest (stale inputs).
    moe = layer("gpt-oss", torch.bfloat16)
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
