"""sinks-dropped-in-draft: inert on a sink-free pair (Mistral with its window: same tokens, same acceptance, no
invariant raised, draft logits equal to a cache-free recompute); on a gpt-oss target drafted by a gpt-oss draft it
stays lossless (greedy identical to HF transformers, the old check) and is caught by INV-SCORE (each sink layer's
attention recomputed with the layer's own sinks) and by the draft oracle."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.attention.invariant_violation import InvariantViolation
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.faults import FAULTS
from specbench.faults.catalog import SINK_MUTANTS, injection, selftest_faults
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.sink_models import build_sink_target
from tests.support.window_models import build_window_target

MAX_TOKENS = 16
ENGINE = {"dtype": "fp32", "device": "cpu", "block_size": 4, "max_concurrency": 4, "num_kv_blocks": 128}
INJECT = "sinks-dropped-in-draft"


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    target, draft = build_sink_target(tmp_path_factory.mktemp("sinks"), "gpt_oss")
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    return target, draft, hf_greedy_outputs(hf, tiny_prompt_ids(), MAX_TOKENS)


def engine(target, draft, *, inject: str | None, debug_invariants: bool) -> LLM:
    return LLM(str(target), method="draft", draft=str(draft), max_num_steps=3, fault=injection(inject),
               debug_invariants=debug_invariants, **ENGINE)


def run(target, draft, *, inject: str | None, debug_invariants: bool) -> tuple[list[list[int]], int]:
    llm = engine(target, draft, inject=inject, debug_invariants=debug_invariants)
    outs = llm.generate(tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs], sum(o.stats.num_accepted_tokens for o in outs)


def oracle_mismatches(target, draft, inject: str | None) -> list[str]:
    reference = engine(target, draft, inject=None, debug_invariants=False)
    num, bad = record_and_compare(engine(target, draft, inject=inject, debug_invariants=False), reference,
                                  tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True), FP32_RTOL)
    assert num > 0
    return bad


def test_sink_mutant_is_injectable_but_not_in_the_selftest():
    assert [m.fault.name for m in SINK_MUTANTS] == [INJECT]
    assert FAULTS[INJECT].methods == ("draft",)
    assert INJECT not in selftest_faults("cpu") and INJECT not in selftest_faults("cuda")


def test_inert_without_sinks(tmp_path):
    built = build_window_target(tmp_path, "mistral-w5")
    clean = run(built.target, built.draft, inject=None, debug_invariants=False)
    assert run(built.target, built.draft, inject=INJECT, debug_invariants=True) == clean
    assert oracle_mismatches(built.target, built.draft, INJECT) == []


def test_lossless_but_caught_by_inv_score_and_the_draft_oracle(gpt_oss):
    target, draft, expected = gpt_oss
    clean_tokens, _ = run(target, draft, inject=None, debug_invariants=True)
    assert clean_tokens == expected
    tokens, accepted = run(target, draft, inject=INJECT, debug_invariants=False)
    assert tokens == expected  # the old check: greedy output identical to HF (and to plain decoding)
    assert accepted > 0
    with pytest.raises(InvariantViolation, match="INV-SCORE violated"):
        run(target, draft, inject=INJECT, debug_invariants=True)
    assert oracle_mismatches(target, draft, None) == []
    bad = oracle_mismatches(target, draft, INJECT)
    assert bad, "the draft oracle recomputes draft logits with the sinks"
