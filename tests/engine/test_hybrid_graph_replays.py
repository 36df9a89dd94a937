"""A hybrid target's CUDA-graph runner (recurrent/graph_rows.py) reproduces its eager engine: greedy tokens, the
state oracle after every step, and the scratch slot left at zeros, on the tiny Qwen3-Next (Gated DeltaNet) and
Bamba (Mamba-2) targets, plain decoding on both, a draft LM at k = 3 on Bamba (every round a uniform verify), and
the Qwen3-Next checkpoint's MTP module at k = 3 (its draft-step and round graphs too; no round drafted ahead).

On CPU the runner "replays" by rerunning the forward on its static buffers through the Triton interpreter: the graph
form of the hybrid forward (padded bucket, slots from the static buffer, kept states handed back as outputs) runs
eagerly, everything but the capture itself (tests/engine/test_cuda_graphs.py does the same for dense targets;
tests/models/test_hybrid_graphs_cuda.py captures real graphs on a GPU).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.hybrid_runs import output_tokens, run_with_oracle  # noqa: E402
from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
    # the interpreter's stand-in for a capture; on a GPU tests/models/test_hybrid_graphs_cuda.py captures real ones
    pytest.mark.skipif(torch.cuda.is_available(), reason="CPU form; test_hybrid_graphs_cuda.py runs on this GPU"),
]

from specbench import LLM  # noqa: E402
from specbench.engine.builder import capture_graphs, graph_plan  # noqa: E402
from specbench.faults import injection  # noqa: E402

LENGTHS = (6, 9, 12, 7, 10)  # requests finish at different steps: buckets 6 (one padding request), 4, 3, 2, 1


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    from specbench.selftest.tiny_mamba2 import build_mamba2_pair
    from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
    from tests.support.tiny_hybrid import build_tiny_hybrid
    from tests.support.tiny_models import build_tiny_model

    root = tmp_path_factory.mktemp("hybrid_graph_replays")
    build_tiny_hybrid(root / "qwen3_next", seed=0)
    bamba, bamba_draft = build_mamba2_pair(root / "bamba", seed=0)  # a draft LM of its vocabulary beside it
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    build_mtp_target(root / "qwen3_next", root / "mtp", MTP_PREFIX)
    return {"qwen3_next": (root / "qwen3_next", root / "draft"), "bamba": (bamba, bamba_draft),
            "mtp": (root / "mtp", None)}


@pytest.fixture(scope="module")
def prompts():
    from tests.support.hf_greedy import tiny_prompt_ids

    return tiny_prompt_ids((6, 13, 9, 17, 11))


def _build(target, graphs: bool, fault: str | None = None, **kwargs) -> LLM:
    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=6, num_kv_blocks=96,
              attention_backend="triton", enforce_eager=True, fault=None if fault is None else injection(fault),
              **kwargs)
    if graphs:
        engine = llm.engine
        plan = graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len)
        capture_graphs(plan, engine.runner, engine.proposer, llm.config.max_num_steps)
    return llm


def _run(llm: LLM, prompts, oracle: bool = True) -> tuple[list[list[int]], float]:
    """(tokens per request, the worst INV-STATE difference over every step; 0.0 without the `oracle`)."""
    prompts = [[t % llm.engine.vocab_size for t in p] for p in prompts]  # the Bamba target's vocabulary is smaller
    outs, worst, _ = run_with_oracle(llm, prompts, LENGTHS, every=1 if oracle else None)
    return output_tokens(outs), worst


def _kwargs(method: str, draft) -> dict:
    """The engine options of `method` (none | draft | mtp) at k = 3."""
    return {"none": {}, "draft": dict(method="draft", draft=str(draft), max_num_steps=3),
            "mtp": dict(method="mtp", max_num_steps=3)}[method]


@pytest.fixture(scope="module")
def eager_tokens(dirs, prompts):
    """(target, method) -> the eager engine's tokens, the yardstick: run once for every test that compares with it
    (the Qwen3-Next plain run serves the replay and the stale-slot mutant), without the state oracle (the graphed
    engine's states are the ones under test; the eager engine's: tests/models/test_hybrid_vs_hf.py and the selftest)."""
    cache: dict[tuple[str, str], list[list[int]]] = {}

    def get(target: str, method: str) -> list[list[int]]:
        if (target, method) not in cache:
            checkpoint, draft = dirs[target]
            cache[target, method] = _run(_build(checkpoint, graphs=False, **_kwargs(method, draft)), prompts,
                                         oracle=False)[0]
        return cache[target, method]

    return get


@pytest.mark.slow  # the Triton interpreter: ~20-40 s per case on 2 busy cores
# Gated DeltaNet: decode graphs (none) and verify graphs (the Qwen3-Next checkpoint's MTP module); Mamba-2: both
# (none, draft). A draft LM or n-gram on Qwen3-Next adds no graph form of its own (n-gram's rounds mostly run eagerly).
@pytest.mark.parametrize("target, method", [("qwen3_next", "none"), ("bamba", "none"), ("bamba", "draft"),
                                            ("mtp", "mtp")])
def test_hybrid_graph_replays_match_eager(dirs, prompts, eager_tokens, target, method):
    checkpoint, draft = dirs[target]
    graphed = _build(checkpoint, graphs=True, **_kwargs(method, draft))
    got, worst = _run(graphed, prompts)
    assert got == eager_tokens(target, method)
    assert worst < 1e-4
    engine = graphed.engine
    assert engine.runner.graphs.num_replays > 0
    taken = engine.paths_taken()
    assert ("graph.hybrid_decode" if method == "none" else "graph.hybrid_verify") in taken
    if method == "mtp":  # its draft graphs run, but a hybrid target reads every round back (engine/step_loop.py)
        assert "eagle.round_graph" in taken and "eagle.ahead" not in taken
    states = engine.runner.kv_cache.states
    scratch = states.scratch_slot
    assert not states.conv[:, scratch].any() and not states.recurrent[:, scratch].any()


@pytest.mark.slow  # the Triton interpreter: ~30 s
def test_a_graph_reading_stale_slots_is_caught(dirs, prompts, eager_tokens):
    """state-graph-slots-stale (faults/state_graph_slots_stale.py): off CUDA its copy is the first replayed step's
    slots, wrong once requests finish and the batch shrinks: tokens and INV-STATE both show it."""
    checkpoint, _ = dirs["qwen3_next"]
    got, worst = _run(_build(checkpoint, graphs=True, fault="state-graph-slots-stale"), prompts)
    assert got != eager_tokens("qwen3_next", "none")
    assert worst > 1e-2
