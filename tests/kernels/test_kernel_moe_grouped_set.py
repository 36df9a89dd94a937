"""The "grouped" MoE kernel set (issue 47) == the MoE layer's eager torch reference (specbench/models/moe.py):
few-token batches through the down projection with the combine in its epilogue (kernels/moe_down_combine.py,
moe_few_token.py), batches past 64 tokens through the grouped GEMM over experts (kernels/moe_prefill.py); each of
its mutants (faults/moe_*.py on the layer's seams) caught by the same comparison.

fp32 under the CPU interpreter at tiny shapes, small tiles so every loop runs more than once with a masked tail; the
real Qwen3-30B-A3B and gpt-oss-20b shapes in bf16 on CUDA (and a CUDA-graph replay of the few-token path).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = [
    pytest.mark.slow,  # ~26 s under the interpreter: the opt-in kernel set (--moe-kernels grouped) waits for its GPU run
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    # The routing kernel's numpy softmax over masked (-inf) lanes (kernels/moe_route.py masks their results).
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide"),
]

from specbench.attention.metadata import PADDING_SLOT
from specbench.execution_paths import PATH_NAMES, PathRecorder
from specbench.faults import moe_combine_weight_swapped, moe_prefill_rows_shifted, moe_verify_rows_shared
from specbench.kernels.moe_down_combine import FEW_MAX_TOKENS, DownCombineTiles, expert_down_combine_few
from specbench.kernels.moe_few_token import few_token_experts
from specbench.kernels.moe_gemv import expert_gate_up
from specbench.kernels.moe_prefill import prefill_experts
from specbench.kernels.moe_sort import sort_by_expert
from specbench.kernels.moe_tiles import ExpertTiles, ProjectionTiles
from specbench.models.moe import MoeMLP
from specbench.models.moe_config import MoeConfig
from specbench.models.moe_forward import moe_forward
from specbench.models.moe_kernel_sets import FEW_TOKEN_PATH, PREFILL_PATH, set_moe_kernels
from specbench.perf.moe_shapes import real_shapes

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN, INTER = 64, 48  # INTER off the tile sizes: masked tails

CONFIGS = {
    "qwen3": MoeConfig(HIDDEN, 8, 2, INTER),
    "gpt-oss": MoeConfig(HIDDEN, 8, 2, INTER, scoring="topk_softmax", norm_topk_prob=False, has_router_bias=True,
                         has_expert_bias=True, activation="swiglu_oai"),
    "glm-shared": MoeConfig(HIDDEN, 8, 2, INTER, scoring="sigmoid", has_score_correction_bias=True,
                            routed_scaling_factor=2.5, shared_intermediate_size=32),
}
SMALL_DOWN = DownCombineTiles(block_n=4, block_k=16, expert_stages=2)  # 3 K steps over INTER = 48, 16 programs
PREFETCHED_DOWN = DownCombineTiles(block_n=4, block_k=16, is_prefetched=True)  # the next expert's first step ahead
SMALL_DOT = ProjectionTiles(is_dot=True, block_n=16, block_k=32, block_m=16)  # several m tiles per expert at 40 rows
SMALL_PREFILL = ExpertTiles(SMALL_DOT, SMALL_DOT)
TOL = {torch.float32: 1e-5, torch.bfloat16: 3e-2}


def layer(name: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> MoeMLP:
    torch.manual_seed(seed)
    moe = MoeMLP(CONFIGS[name])
    with torch.no_grad():
        if moe.gate_up_bias is not None:
            moe.gate_up_bias.normal_()
            moe.down_bias.normal_()
        if moe.score_correction_bias is not None:
            moe.score_correction_bias.normal_(std=0.1)
    moe = moe.to(DEVICE, dtype)
    moe.moe_kernels = "grouped"
    return moe


def x_for(num_tokens: int, dtype: torch.dtype = torch.float32, seed: int = 1, hidden: int = HIDDEN) -> torch.Tensor:
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.randn(num_tokens, hidden, generator=gen, device=DEVICE).to(dtype)


def is_close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    tol = TOL[got.dtype]
    return got.shape == expected.shape and torch.allclose(
        got.float(), expected.float(), atol=tol * expected.float().abs().max().item(), rtol=tol)


def expert_args(moe: MoeMLP) -> dict:
    return moe._expert_args()


@pytest.mark.parametrize("name, num_tokens", [("qwen3", 2), ("qwen3", FEW_MAX_TOKENS), ("gpt-oss", 5),
                                              ("glm-shared", 9)])
def test_down_combine_matches_reference(name, num_tokens):
    # The new kernel on its own after moe_gemv's grouped gate_up; small tiles: K loop with a tail, many programs.
    moe = layer(name)
    x = x_for(num_tokens, seed=num_tokens)
    routing = moe.route(x)
    order = sort_by_expert(routing.topk_ids, moe.config.num_experts)
    args = expert_args(moe)
    act = expert_gate_up(x, routing.topk_ids, order, moe.gate_up_weight, args.pop("gate_up_bias"), SMALL_DOT, **{
        k: args[k] for k in ("is_swiglu_oai", "swiglu_alpha", "swiglu_limit")})
    weights = routing.topk_weights.reshape(-1).contiguous()
    got = expert_down_combine_few(act, weights, order, moe.down_weight, moe.down_bias, num_tokens, SMALL_DOWN)
    expected = moe.reference_experts(x, routing)
    assert is_close(got, expected)
    prefetched = expert_down_combine_few(act, weights, order, moe.down_weight, moe.down_bias, num_tokens,
                                         PREFETCHED_DOWN)
    # Other tiles, other reduction order: close, not the same bits (on the H100 they differ; the interpreter
    # happens to agree), which is one reason the set stays opt-in (README.md, "MoE kernels").
    assert is_close(prefetched, expected)
    assert torch.equal(got, expert_down_combine_few(act, weights, order, moe.down_weight, moe.down_bias, num_tokens,
                                                    SMALL_DOWN))  # deterministic: no atomics


@pytest.mark.parametrize("name", ["qwen3", "glm-shared"])
def test_layer_few_tokens_matches_reference(name):
    # The whole layer under the set: routing kernel, few-token experts, the folded shared expert (GLM-4.5).
    moe = layer(name)
    for num_tokens in (1, 4):
        x = x_for(num_tokens, seed=10 + num_tokens)
        assert is_close(moe(x, is_fused=True), moe(x))


def test_padded_rows_never_touch_real_rows():
    # A graph batch of 8 rows, 3 real: the padded rows route to no expert and come out zero, real rows bit-exact.
    moe = layer("gpt-oss")
    x = x_for(8, seed=3)
    x[3:] = 1e30  # garbage in padded rows must not reach real ones
    routing = moe.route(x, torch.arange(8, device=DEVICE) < 3)
    alone = moe.route(x[:3])
    padded = few_token_experts(x, routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight,
                               down_tiles=SMALL_DOWN, **expert_args(moe))
    real = few_token_experts(x[:3], alone.topk_ids, alone.topk_weights, moe.gate_up_weight, moe.down_weight,
                             down_tiles=SMALL_DOWN, **expert_args(moe))
    # Padded rows come out zero and leave the real ones right; the real rows are close to the same rows run alone,
    # not bit-equal on the H100 (the tiles' row count changes the dot's reduction order): not batch-invariant.
    assert (padded[3:] == 0).all() and is_close(padded[:3], real)


@pytest.mark.parametrize("name", ["qwen3", "gpt-oss"])
def test_prefill_grouped_gemm_matches_reference(name):
    # 70 tokens x top-2 over 8 experts: ~17 rows an expert, two m tiles each; chunks of 40 tokens (two chunks).
    moe = layer(name)
    x = x_for(70, seed=7)
    routing = moe.route(x)
    got = prefill_experts(x, routing.topk_ids, routing.topk_weights, moe.gate_up_weight, moe.down_weight,
                          tiles=SMALL_PREFILL, chunk_tokens=40, **expert_args(moe))
    assert is_close(got, moe.reference_experts(x, routing))


def test_moe_forward_records_the_grouped_paths(monkeypatch):
    # moe_forward takes and records the set's paths: a verify-sized batch and a prefill past 64 tokens.
    moe = layer("qwen3")
    moe.fused_policy = "on"  # kernels on the CPU too (the interpreter)
    monkeypatch.setattr("specbench.kernels.moe_prefill.PREFILL_TILES", SMALL_PREFILL)
    recorder = PathRecorder(PATH_NAMES)
    for num_tokens, path in ((4, FEW_TOKEN_PATH), (66, PREFILL_PATH)):
        x = x_for(num_tokens, seed=num_tokens)
        md = _metadata(num_tokens)
        with recorder.collecting() as taken:
            got = moe_forward(moe, x, md, recorder)
        assert taken == {path}
        assert is_close(got, moe(x))
    assert set_moe_kernels(torch.nn.Sequential(moe), "gemv") == 1 and moe.moe_kernels == "gemv"
    with recorder.collecting() as taken:
        moe_forward(moe, x_for(4), _metadata(4), recorder)
    assert taken == set()


def _metadata(num_tokens: int):
    class Md:  # moe_forward reads the slot mapping only
        slot_mapping = torch.arange(num_tokens, device=DEVICE)

    assert PADDING_SLOT not in Md.slot_mapping.tolist()
    return Md()


@pytest.mark.parametrize("bend, num_tokens", [
    (moe_combine_weight_swapped.bend, 5),
    (moe_verify_rows_shared.bend, 5),  # 10 slots over 8 experts: some expert holds two tokens
    (moe_prefill_rows_shifted.bend, 70),
])
def test_each_mutant_is_caught_against_the_reference(bend, num_tokens, monkeypatch):
    monkeypatch.setattr("specbench.kernels.moe_prefill.PREFILL_TILES", SMALL_PREFILL)
    moe = layer("qwen3")
    x = x_for(num_tokens, seed=21)
    expected = moe(x)
    assert is_close(moe(x, is_fused=True), expected)  # clean
    bend(moe)
    assert not is_close(moe(x, is_fused=True), expected)  # bent: caught


# ---- CUDA: the real shapes ------------------------------------------------------------------------------------------

REAL_SHAPES = real_shapes() if torch.cuda.is_available() else {}


def _real_layer(shape: str) -> MoeMLP:
    torch.manual_seed(0)
    with torch.device("cuda"):
        moe = MoeMLP(REAL_SHAPES[shape]).to(torch.bfloat16)
    with torch.no_grad():
        if moe.gate_up_bias is not None:
            moe.gate_up_bias.normal_(std=0.5)
            moe.down_bias.normal_(std=0.5)
    moe.moe_kernels = "grouped"
    return moe


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="real shapes: CUDA only")
@pytest.mark.parametrize("shape", ["qwen3-30b-a3b", "gpt-oss-20b"])
def test_real_shapes_match_reference_on_cuda(shape):
    # bf16: few-token experts at 2-16 tokens (the reference's routing for both: the router kernel could flip a
    # near-tie among 128 experts), twice (same bits); the prefill grouped GEMM at 1024 tokens.
    moe = _real_layer(shape)
    hidden = moe.config.hidden_size
    with torch.no_grad():
        for num_tokens in (2, 4, 9, 16):
            x = x_for(num_tokens, torch.bfloat16, seed=num_tokens, hidden=hidden)
            routing = moe.route(x)
            got = moe.few_token_experts(x, routing)
            assert is_close(got, moe.reference_experts(x, routing)), num_tokens
            assert torch.equal(got, moe.few_token_experts(x, routing))
        x = x_for(1024, torch.bfloat16, seed=5, hidden=hidden)
        routing = moe.route(x)
        assert is_close(moe.prefill_experts(x, routing), moe.reference_experts(x, routing))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_few_token_graph_replays_with_fewer_real_rows():
    # One graph captured at 16 rows under the set, replayed with 16, 9 and 2 real rows and NaN in the rest.
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
        for num_real in (16, 9, 2):
            x = x_for(num_real, torch.bfloat16, seed=num_real)
            static_x.fill_(float("nan"))
            static_x[:num_real] = x
            static_is_real.copy_(torch.arange(num_rows, device=DEVICE) < num_real)
            graph.replay()
            assert is_close(static_out[:num_real].clone(), moe(x))
            assert (static_out[num_real:] == 0).all()
