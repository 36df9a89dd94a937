"""A default hybrid engine on CUDA captures and replays CUDA graphs for its plain decode and uniform chain verifies
(recurrent/graph_rows.py), and its greedy tokens equal the same engine's with --enforce-eager (fp32): the tiny
Qwen3-Next (Gated DeltaNet) target plain, with a draft LM at k = 3 (every round a uniform verify), n-gram at k = 3
(ragged rounds eager between replays) and its MTP module at k = 3, and the tiny Bamba (Mamba-2) target plain and
with a draft LM; the state oracle (INV-STATE) after every step of the graphed engines; the scratch slot padding
requests read still zeros at the end. The stale-slot mutant (faults/state_graph_slots_stale.py) is caught by both.

    python -m pytest -q -n 0 tests/models/test_hybrid_graphs_cuda.py

Every engine on "cuda" with a fixed 0.25 GB KV pool (the GPU scripts run these beside the CUDA selftest's workers).
"""

from __future__ import annotations

import pytest
import torch

from specbench.faults import injection
from specbench.engine.builder import HYBRID_GRAPHS_NOTE
from tests.support.hybrid_runs import NGRAM, hybrid_llm, output_tokens, run_with_oracle

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

LENGTHS = (20, 33, 41, 27, 48, 12, 36, 24)  # requests finish at different steps: every bucket below 8 replays
STATE_ATOL = 1e-3  # INV-STATE in fp32: a wrong slot or rollback is off by O(0.1)
ENGINE = {"device": "cuda", "kv_cache_gb": 0.25, "max_concurrency": 8}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    from specbench.selftest.tiny_mamba2 import build_mamba2_pair
    from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
    from tests.support.tiny_hybrid import build_tiny_hybrid
    from tests.support.tiny_models import build_tiny_model

    root = tmp_path_factory.mktemp("hybrid_graphs_cuda")
    build_tiny_hybrid(root / "qwen3_next", seed=0)
    build_mtp_target(root / "qwen3_next", root / "mtp", MTP_PREFIX)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    bamba, bamba_draft = build_mamba2_pair(root / "bamba", seed=0)
    return {"qwen3_next": (root / "qwen3_next", root / "draft"), "mtp": (root / "mtp", None),
            "bamba": (bamba, bamba_draft)}


@pytest.fixture(scope="module")
def prompts():
    from tests.support.hf_greedy import tiny_prompt_ids

    return tiny_prompt_ids((6, 33, 13, 21, 9, 17, 11, 25))


def _options(method: str, draft) -> dict:
    return {"none": {}, "draft": {"method": "draft", "draft": str(draft), "max_num_steps": 3},
            "ngram": NGRAM, "mtp": {"method": "mtp", "max_num_steps": 3}}[method]


def _run(llm, prompts, check_states: bool) -> tuple[list[list[int]], float]:
    """(tokens per request, the worst INV-STATE difference: every step when asked)."""
    prompts = [[t % llm.engine.vocab_size for t in p] for p in prompts]  # the Bamba target's vocabulary is smaller
    outs, worst, _ = run_with_oracle(llm, prompts, LENGTHS, every=1 if check_states else None)
    return output_tokens(outs), worst


CASES = [("qwen3_next", "none"), ("qwen3_next", "draft"), ("qwen3_next", "ngram"), ("mtp", "mtp"), ("bamba", "none"),
         ("bamba", "draft")]


@pytest.mark.parametrize("target, method", CASES)
def test_gpu_hybrid_graphs_match_enforce_eager(dirs, prompts, target, method):
    checkpoint, draft = dirs[target]
    options = {**ENGINE, **_options(method, draft)}
    expected, _ = _run(hybrid_llm(checkpoint, enforce_eager=True, **options), prompts, check_states=False)
    graphed = hybrid_llm(checkpoint, **options)
    assert graphed.engine.parts.cuda_graphs == HYBRID_GRAPHS_NOTE
    got, worst = _run(graphed, prompts, check_states=True)
    same = sum(a == b for x, y in zip(got, expected) for a, b in zip(x, y)) / sum(map(len, expected))
    from tests.support.gpu_report import record_gpu_result

    record_gpu_result(f"hybrid_graphs_vs_eager_{target}_{method}", {"same": same, "worst_state": worst})
    assert got == expected
    assert worst < STATE_ATOL
    engine = graphed.engine
    assert engine.runner.graphs.num_replays > 0
    taken = engine.paths_taken()
    assert "graph.hybrid_decode" in taken or "graph.hybrid_verify" in taken
    if method in ("draft", "mtp"):  # every request drafts k once caught up: uniform verifies
        assert "graph.hybrid_verify" in taken
    if method == "none":
        assert "graph.hybrid_decode" in taken
    assert "eagle.ahead" not in taken  # a hybrid target reads every round back (engine/step_loop.py)
    states = engine.runner.kv_cache.states
    assert not states.conv[:, states.scratch_slot].any() and not states.recurrent[:, states.scratch_slot].any()


@pytest.mark.parametrize("method", ["none", "draft"])
def test_gpu_stale_graph_slots_are_caught(dirs, prompts, method):
    """state-graph-slots-stale: on CUDA its copy is the capture warm-up's slots (every row padding), so each replay
    runs every request from the scratch slot: the tokens and INV-STATE both show it."""
    checkpoint, draft = dirs["qwen3_next"]
    options = {**ENGINE, **_options(method, draft)}
    expected, _ = _run(hybrid_llm(checkpoint, enforce_eager=True, **options), prompts, check_states=False)
    got, worst = _run(hybrid_llm(checkpoint, fault=injection("state-graph-slots-stale"), **options), prompts,
                      check_states=True)
    assert got != expected
    assert worst > 10 * STATE_ATOL
