"""EAGLE drafting rounds replayed as one graph (catch-up padded to k + 1, then steps 1 .. k - 1) draft exactly
what eager mode drafts: same tokens, same per-position acceptance. On CPU the graph "replays" by rerunning on its
static buffers through the Triton interpreter; on a GPU it is a captured CUDA graph."""

from __future__ import annotations


import pytest
import torch

pytest.importorskip("triton")

from specbench.kernels.testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from eagle_heads import VARIANTS  # noqa: E402

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.engine.builder import capture_graphs, graph_plan  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def run(target, head, prompts, graphs: bool, num_steps: int = 3, inject: str | None = None):
    llm = LLM(str(target), method="eagle3", draft=str(head), max_num_steps=num_steps, dtype="fp32", device=DEVICE,
              block_size=4, max_concurrency=4, num_kv_blocks=128, attention_backend="triton", enforce_eager=True,
              inject=inject)
    engine = llm.engine
    if graphs:
        capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                       engine.proposer, num_steps)
    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (14, 9, 17)]
    outs = llm.generate(prompts, params)
    return engine, [(list(o.output_token_ids), o.stats.num_accepted_per_pos) for o in outs]


@pytest.mark.slow  # ~11 s on CPU
def test_round_graph_matches_eager(target_dir, head_dir, prompt_ids):
    variant = "eagle3-native-flat"
    target, head = target_dir(VARIANTS[variant].target), head_dir(variant)
    prompts = prompt_ids[:3]
    _, expected = run(target, head, prompts, graphs=False)
    engine, got = run(target, head, prompts, graphs=True)
    assert got == expected
    assert engine.proposer.round_graphs[3].num_replays > 0
    assert sum(sum(acc) for _, acc in expected) > 0  # the fitted head drafts tokens the target accepts


def test_faults_take_the_eager_draft_path(target_dir, head_dir, prompt_ids, monkeypatch):
    # As a production run: with debug invariants on, INV-REQ stops this mutant at its first stale step.
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    variant = "eagle3-native-flat"
    target, head = target_dir(VARIANTS[variant].target), head_dir(variant)
    engine, _ = run(target, head, prompt_ids[:3], graphs=True, inject="stale-draft-metadata")
    assert engine.proposer.round_graphs[3].num_replays == 0 and engine.proposer.step_graphs.num_replays > 0
