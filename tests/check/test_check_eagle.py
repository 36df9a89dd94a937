"""The check battery on EAGLE-3: every draft-side mutant detected by the draft oracle, the clean engine passes."""

from __future__ import annotations

import pytest
from tests.support.eagle_heads import PREEMPTING_KV_BLOCKS, build_head_dir, build_target
from tests.support.tiny_models import gsm8k_questions, load_tiny_tokenizer

from specbench import SamplingParams
from specbench.check.battery import run_checks
from specbench.check.engine_defaults import check_engine
from specbench.check.oracle import FP32_RTOL, record_and_compare
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.faults import FAULTS
from specbench.faults.catalog import needs_chunked_prefill, needs_tree_shape

# Phase-hook mutants only: the fast-path mutants (f.path) are for the new sentinel (docs/path-mutants.md); this
# battery drafts chains, on which the tree mutants are inert (tests/check/test_tree_oracle.py runs them on trees),
# with whole-prompt prefill, on which the chunk mutants are (tests/faults/test_chunk_mutants.py).
DRAFT_FAULTS = [name for name, f in FAULTS.items()
                if f.layer == "draft" and "eagle3" in f.methods and not f.path and not needs_tree_shape(name)
                and not needs_chunked_prefill(name)]
# Faults whose metadata is self-inconsistent (position vs visible keys / slot), or whose draft steps disagree with
# the requests' committed lengths (INV-REQ): the invariant sweep sees them too. phase-state-leak feeds a
# well-formed but wrong draft-extend input: only the oracle can see it.
INVARIANT_VISIBLE = {"draft-positions-off-by-one", "draft-kv-slice", "catchup-sees-rejected", "stale-draft-metadata",
                     "draft-step-shifted", "draft-max-seq-len-stale"}


@pytest.fixture(scope="module")
def eagle3_setup(tmp_path_factory) -> CheckSetup:
    root = tmp_path_factory.mktemp("eagle_check")
    target = build_target(root, "t4")
    head = build_head_dir(root / "heads", "eagle3-native-nested", target)
    tok = load_tiny_tokenizer()
    prompts = tuple(tuple(tok(q)["input_ids"][:n]) for q, n in zip(gsm8k_questions("test")[:6], (9, 30, 14, 22, 6, 35)))
    return CheckSetup(check_engine(target=str(target), method="eagle3", draft=str(head), max_num_steps=3), prompts)


def _results(setup: CheckSetup, inject: str | None, checks: tuple[str, ...]):
    return {r.name: r for r in run_checks(setup.with_inject(inject), checks)}


def test_draft_side_faults_apply_to_eagle():
    for name in DRAFT_FAULTS:
        assert {"eagle", "eagle3"} <= set(FAULTS[name].methods), name


def test_clean_eagle3_passes_oracle_and_invariants(eagle3_setup):
    results = _results(eagle3_setup, None, ("oracle", "invariants"))
    for r in results.values():
        assert r.passed and not r.skipped, f"{r.name}: {r.detail}"
    assert "/0 " not in results["oracle"].detail, results["oracle"].detail


def test_clean_eagle3_oracle_holds_across_preemption(eagle3_setup):
    llm = build_llm(eagle3_setup, num_kv_blocks=PREEMPTING_KV_BLOCKS)
    num, bad = record_and_compare(llm, build_reference_drafting_llm(eagle3_setup.engine), prompt_list(eagle3_setup),
                                  SamplingParams(max_tokens=24, ignore_eos=True), FP32_RTOL)
    assert sum(s.num_preempted for s in llm.engine.step_stats) > 0
    assert num > 100 and not bad, bad[:3]


@pytest.mark.slow
@pytest.mark.parametrize("inject", DRAFT_FAULTS)
def test_every_draft_fault_detected_on_eagle3(eagle3_setup, inject):
    results = _results(eagle3_setup, inject, ("oracle", "invariants"))
    oracle, invariants = results["oracle"], results["invariants"]
    assert not oracle.skipped and not oracle.passed, f"{inject} undetected by the oracle: {oracle.detail}"
    assert invariants.passed == (inject not in INVARIANT_VISIBLE), f"{inject}: {invariants.detail}"
