"""The chunked-prefill mutants (faults/chunk_*.py): each is inert on whole-prompt prefill (same tokens as the clean
engine) and caught with --enable-chunked-prefill: the target-side ones by greedy identity against whole-prompt
prefill (the independent reference), the EAGLE one by the proposer's refusal of features that do not continue the
pending ones."""

from __future__ import annotations

import random

import pytest
from tests.support.tiny_models import build_tiny_model, derive_draft

from specbench import LLM, SamplingParams
from specbench.faults.catalog import CHUNK_MUTANTS, injection, needs_chunked_prefill, selftest_faults

LENGTHS = (5, 9, 15, 16, 17, 33)  # at and around the 8-token chunk's multiples, beside short decoding prompts
METHOD = {"chunk-positions-shifted": "draft", "chunk-logits-row-shifted": "draft",
          "chunk-feature-start-lost": "eagle3"}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, tuple[str, str]]:
    from specbench.selftest.tiny_eagle import build_tiny_eagle_head

    root = tmp_path_factory.mktemp("chunk-mutants")
    build_tiny_model(root / "target", "llama", num_layers=2, seed=0)
    derive_draft(root / "target", root / "draft", noise=0.15, seed=1)
    head = build_tiny_eagle_head(root / "target", root / "head")
    return {"draft": (str(root / "target"), str(root / "draft")), "eagle3": (str(root / "target"), head)}


def generate(models, method: str, *, chunked: bool, inject: str | None) -> list[list[int]]:
    target, draft = models[method]
    rng = random.Random(0)
    prompts = [[rng.randrange(5, 500) for _ in range(n)] for n in LENGTHS]
    llm = LLM(target, method=method, draft=draft, max_num_steps=3, dtype="fp32", device="cpu", block_size=4,
              max_concurrency=3, kv_cache_gb=0.05, enable_chunked_prefill=chunked, max_num_batched_tokens=8,
              fault=injection(inject))
    outs = llm.generate(prompts, SamplingParams(max_tokens=10, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs]


def test_chunk_mutants_run_on_the_selftest_chunked_rows_only():
    for mutant in CHUNK_MUTANTS:
        assert needs_chunked_prefill(mutant.fault.name)
        assert mutant.fault.name in selftest_faults("cpu") and mutant.fault.name in selftest_faults("cuda")


@pytest.mark.parametrize("inject", [m.fault.name for m in CHUNK_MUTANTS])
def test_inert_on_whole_prompt_prefill_caught_with_chunks(models, inject):
    method = METHOD[inject]
    reference = generate(models, method, chunked=False, inject=None)
    assert generate(models, method, chunked=False, inject=inject) == reference
    assert generate(models, method, chunked=True, inject=None) == reference
    if inject == "chunk-feature-start-lost":
        with pytest.raises(RuntimeError, match="target features handed at position 0"):
            generate(models, method, chunked=True, inject=inject)
    else:
        assert generate(models, method, chunked=True, inject=inject) != reference
