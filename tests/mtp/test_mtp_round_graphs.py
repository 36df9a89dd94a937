"""MTP rounds replayed as one graph, and drafted ahead from a verify the host has not read, draft exactly what
eager drafting does (the EAGLE round machinery around the MTP module). On CPU the graphs "replay" through the
Triton interpreter; on a GPU they are captured CUDA graphs."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = [pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON),
              pytest.mark.slow]  # interpreted round graphs: tens of seconds on 2 busy cores

from specbench import LLM, SamplingParams
from specbench.engine.builder import capture_graphs, graph_plan
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mtp_graphs")
    base, _ = build_tiny_pair(root / "pair", seed=0, variant="llama")
    return build_mtp_target(base, root / "target", MTP_PREFIX)


def _run(target: str, graphs: bool, async_scheduling: bool):
    llm = LLM(target, method="mtp", max_num_steps=3, dtype="fp32", device=DEVICE, block_size=4, max_concurrency=4,
              num_kv_blocks=128, attention_backend="triton", enforce_eager=True, async_scheduling=async_scheduling,
              debug_invariants=True)
    engine = llm.engine
    if graphs:
        capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                       engine.proposer, 3)
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (20, 9, 16)]
    outs = llm.generate(random_prompts(3, seed=0), params)
    return engine, [(list(o.output_token_ids), o.stats.num_accepted_per_pos, o.stats.num_drafted_per_pos)
                    for o in outs]


@pytest.mark.parametrize("async_scheduling", [False, True], ids=["round-graph", "drafted-ahead"])
def test_graphed_rounds_match_eager(target, async_scheduling):
    _, expected = _run(target, graphs=False, async_scheduling=async_scheduling)
    engine, got = _run(target, graphs=True, async_scheduling=async_scheduling)
    assert got == expected
    rounds = engine.proposer.round_graphs[3]
    assert rounds.num_replays > 0
    assert (rounds.num_ahead > 0) == async_scheduling
