"""On CUDA, every path mutant under the production configuration (CUDA graphs, overlapped steps, rounds drafted
ahead, fused projections, the Triton verifier and attention): it changes what the engine does against the
independent reference (eager, synchronous, unfused torch layers, torch attention and verifier). fp32 keeps the
comparisons exact."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.check.reference import REFERENCE_SETTINGS
from specbench.faults import injection
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from tests.support.no_bias_tiny import build_cycling_target, build_no_bias_target

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="production paths of a CUDA device")]

ENGINE = {"dtype": "fp32", "device": "cuda", "block_size": 4, "num_kv_blocks": 256, "max_concurrency": 4}
REFERENCE = {**REFERENCE_SETTINGS, "method": "none"}  # the independent reference (check/reference.py)


def generate(target: str, prompts, *, unfused: bool = False, max_tokens: int = 20, inject: str | None = None,
             **config):
    """(outputs, accepted drafts in all, the engine); unfused: the torch layers (fused-kernel policy off);
    `inject`: the fault applied to the engine."""
    llm = LLM(target, fault=injection(inject), **{**ENGINE, "fused_kernels": "off" if unfused else "auto", **config})
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    return ([list(o.output_token_ids) for o in outs], sum(sum(o.stats.num_accepted_per_pos) for o in outs),
            llm.engine)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    root = tmp_path_factory.mktemp("cuda_mutants")
    target, draft = build_tiny_pair(root / "pair", seed=0)
    return {"target": target, "draft": draft, "eagle3": build_tiny_eagle_head(target, root / "eagle3"),
            "no_bias": build_no_bias_target(root / "no_bias"), "cycling": build_cycling_target(root / "cycling")}


# (mutant, target model, engine config, is the output corrupted (else: lossless, acceptance drops))
CASES = [
    ("overlap-stale-input", "target", {"method": "none"}, True),
    ("preempt-stale-computed", "target", {"method": "none", "num_kv_blocks": 14}, True),
    ("fused-residual-twice", "no_bias", {"method": "none"}, True),
    ("rope-store-slot-shift", "no_bias", {"method": "none"}, True),
    ("triton-bonus-neighbour", "target", {"method": "draft", "draft": "draft", "max_num_steps": 3}, True),
    ("ngram-continuation-late", "cycling", {"method": "ngram", "max_num_steps": 3}, False),
    ("ahead-positions-stale", "target", {"method": "eagle3", "draft": "eagle3", "max_num_steps": 3}, False),
    ("round-graph-stale-features", "target", {"method": "eagle3", "draft": "eagle3", "max_num_steps": 3}, False),
]


@pytest.mark.parametrize("inject, target, config, corrupts", CASES, ids=[c[0] for c in CASES])
def test_path_mutant_changes_the_production_engine(models, monkeypatch, inject, target, config, corrupts):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")  # as users run it
    config = {k: models[v] if k == "draft" else v for k, v in config.items()}
    prompts = random_prompts(3)
    reference, _, _ = generate(models[target], prompts, unfused=True, **REFERENCE)
    clean, clean_accepted, engine = generate(models[target], prompts, **config)
    assert engine.parts.cuda_graphs == "on"
    assert clean == reference
    bent, bent_accepted, _ = generate(models[target], prompts, inject=inject, **config)
    if corrupts:
        assert bent != reference
    else:
        assert bent == reference and bent_accepted < clean_accepted, (bent_accepted, clean_accepted)
