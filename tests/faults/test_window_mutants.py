"""The sliding-window mutants (faults/window_*.py): each is inert on a full-attention target (the old battery's
targets: same tokens, same acceptance, no invariant raised, draft logits equal to a cache-free recompute) and caught
on a window target: target-side ones by greedy output against HF transformers, the draft-side one by the draft oracle
(its acceptance barely moves on this tiny pair: 48 vs 48 accepted at k = 3, 52 vs 51 at k = 5); all of them by
INV-KIND once the debug invariants are on."""

from __future__ import annotations

import pytest
import torch
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.window_models import build_window_target

from specbench import LLM, SamplingParams
from specbench.attention.invariant_violation import InvariantViolation
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.faults import FAULTS
from specbench.faults.catalog import WINDOW_MUTANTS, injection, selftest_faults, window_moe_faults

MAX_TOKENS = 16
ENGINE = {"dtype": "fp32", "device": "cpu", "block_size": 4, "max_concurrency": 4, "num_kv_blocks": 128}
# mutant -> the method it runs under here (the draft-side one needs the draft LM; the others bend the target)
METHOD = {"window-not-rebuilt-between-draft-steps": "draft", "window-off-by-one": "draft",
          "window-missing-in-verify": "draft", "window-missing-in-catch-up": "draft"}


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """(WindowTarget, HF greedy of the windowed target, HF greedy of the same weights without the window)."""
    from transformers import AutoModelForCausalLM

    built = build_window_target(tmp_path_factory.mktemp("window"), "mistral-w5")
    refs = [hf_greedy_outputs(AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval(), tiny_prompt_ids(),
                              MAX_TOKENS) for d in (built.target, built.unwindowed)]
    return built, *refs


def engine(target, draft, *, inject: str | None, debug_invariants: bool) -> LLM:
    return LLM(str(target), method="draft", draft=str(draft), max_num_steps=3, fault=injection(inject),
               debug_invariants=debug_invariants, **ENGINE)


def run(target, draft, *, inject: str | None, debug_invariants: bool) -> tuple[list[list[int]], int]:
    """(greedy tokens, accepted draft tokens) of a draft-LM engine with k = 3."""
    llm = engine(target, draft, inject=inject, debug_invariants=debug_invariants)
    outs = llm.generate(tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs], sum(o.stats.num_accepted_tokens for o in outs)


def oracle_mismatches(target, draft, inject: str | None) -> list[str]:
    """The draft oracle (check 3): each recorded draft-step logit vs a clean engine's cache-free recompute."""
    reference = engine(target, draft, inject=None, debug_invariants=False)
    num, bad = record_and_compare(engine(target, draft, inject=inject, debug_invariants=False), reference,
                                  tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True), FP32_RTOL)
    assert num > 0
    return bad


def test_window_mutants_run_on_the_selftest_window_target_not_on_its_full_attention_seeds():
    names = [m.fault.name for m in WINDOW_MUTANTS]
    assert sorted(names) == sorted(METHOD)
    assert all(FAULTS[n].methods and "draft" in FAULTS[n].methods for n in names)
    assert not set(names) & set(selftest_faults("cpu")) and not set(names) & set(selftest_faults("cuda"))
    assert set(names) <= set(window_moe_faults("cpu")) and set(names) <= set(window_moe_faults("cuda"))


@pytest.mark.parametrize("inject", sorted(METHOD))
def test_inert_on_a_full_attention_target(mistral, inject):
    built, _, expected = mistral
    clean = run(built.unwindowed, built.unwindowed_draft, inject=None, debug_invariants=False)
    assert clean[0] == expected
    # Debug invariants on: nothing raises, the very tokens and acceptance of the clean engine.
    assert run(built.unwindowed, built.unwindowed_draft, inject=inject, debug_invariants=True) == clean
    assert oracle_mismatches(built.unwindowed, built.unwindowed_draft, inject) == []


@pytest.mark.parametrize("inject", ["window-off-by-one", "window-missing-in-verify"])
def test_target_side_window_mutants_change_greedy_output_and_trip_inv_kind(mistral, inject):
    built, expected, _ = mistral
    assert run(built.target, built.draft, inject=None, debug_invariants=True)[0] == expected
    assert run(built.target, built.draft, inject=inject, debug_invariants=False)[0] != expected
    with pytest.raises(InvariantViolation, match="INV-KIND violated"):
        run(built.target, built.draft, inject=inject, debug_invariants=True)


def test_stale_draft_window_is_lossless_but_fails_the_draft_oracle_and_trips_inv_kind(mistral):
    built, expected, _ = mistral
    inject = "window-not-rebuilt-between-draft-steps"
    assert run(built.target, built.draft, inject=inject, debug_invariants=False)[0] == expected
    assert oracle_mismatches(built.target, built.draft, None) == []
    bad = oracle_mismatches(built.target, built.draft, inject)
    # Recorded steps count from 0 (the catch-up's draft): step 1 builds its own window, step 2 is the first stale
    # one. Later mismatches anywhere follow from there: a stale step writes wrong K/V in the layers above the first.
    assert bad and " step 2 " in bad[0], bad[:3]
    with pytest.raises(InvariantViolation, match="draft_step_2: INV-KIND violated"):
        run(built.target, built.draft, inject=inject, debug_invariants=True)


def test_catch_up_without_its_window_is_lossless_but_fails_the_draft_oracle_and_trips_inv_kind(mistral):
    built, expected, _ = mistral
    inject = "window-missing-in-catch-up"
    assert run(built.target, built.draft, inject=inject, debug_invariants=False)[0] == expected
    bad = oracle_mismatches(built.target, built.draft, inject)
    assert bad and " step 0 " in bad[0], bad[:3]  # the catch-up's own draft is the first one wrong
    with pytest.raises(InvariantViolation, match="draft_extend: INV-KIND violated"):
        run(built.target, built.draft, inject=inject, debug_invariants=True)
