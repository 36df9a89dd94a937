"""Issue 25 item 5: every registered speculative method runs in the selftest, n-gram included, on prompts it drafts
and is accepted on; every fault each method hosts detected, without false alarms.

The per-method mutation rows come from one selftest run over the draft LM, EAGLE-1, EAGLE-3 and n-gram (the module
fixture): the plain engine's row and its faults, the seed's models and the greedy reference run once for all four
rather than once per method; its chunked rows host the chunked-prefill faults (test_selftest_chunked.py plans them).
The constrained rows and the grammar faults: test_selftest_constrained.py (every method, chains and trees); the clean
rows of ten seeds: test_check_false_alarms_selftest.py."""

from __future__ import annotations

import pytest
from tests.support.selftest_rows import assert_selftest_rows

from specbench.check.baseline import measure_acceptance
from specbench.check.budget import Budget
from specbench.faults import FAULTS
from specbench.faults.catalog import (CHUNK_MUTANTS, GRAMMAR_MUTANTS, needs_constrained_decoding, needs_tree_shape,
                                      selftest_faults)
from specbench.selftest.drafters import TINY_DRAFTERS
from specbench.selftest.runner import (METHODS, PLAIN, SelftestRow, format_mutation_table, run_selftest,
                                       selftest_coverage, selftest_ok, selftest_setups)
from specbench.speculation.registry import PROPOSERS

# every fault on one seed (the seed-0 biased pair the faults are tuned on)
MUTANT_SEEDS = (0,)
MUTANT_METHODS = ("draft", "eagle", "eagle3", "ngram")
# The full battery but the invariant sweep's forced-acceptance cases (six engine builds of its eight per row): no
# fault names the sweep as the check that catches it (faults/fault.py; assert_selftest_rows asserts each fault's
# catcher sees it), and the clean rows' full sweep on this seed, every method, runs in test_selftest_paths.py
# (torch_rows, which asserts it ran there).
MUTANT_ROWS = Budget("mutant-rows", None, None, False, True, True, "the invariant sweep's forced-acceptance cases")


@pytest.fixture(scope="module")
def mutant_rows() -> list[SelftestRow]:
    """Every fault each of MUTANT_METHODS hosts, one seed, every check: ~5 min on 2 busy cores."""
    return run_selftest(seeds=MUTANT_SEEDS, methods=MUTANT_METHODS, constrained=False, budget=MUTANT_ROWS)


def _method_rows(rows: list[SelftestRow], method: str) -> list[SelftestRow]:
    """The plain engine's rows and `method`'s: what a `--methods <method>` run of the same seeds holds."""
    return [r for r in rows if r.method in (PLAIN, method)]


def test_selftest_methods_are_the_registered_proposers():
    assert set(METHODS) == set(PROPOSERS.supported()) - {"none"}
    assert set(TINY_DRAFTERS.supported()) == set(METHODS)  # a new proposer needs a tiny drafter here


def test_ngram_drafts_and_is_accepted_on_the_selftest_prompts(tmp_path):
    for seed in (0, 1):
        measured = measure_acceptance(selftest_setups(str(tmp_path), seed, ("ngram",), 3)["ngram"])
        assert measured.num_drafted_per_pos[0] >= 15, measured  # ~1 round in 3 drafts
        assert min(measured.num_accepted_per_pos) >= 8, measured  # full copies accepted...
        assert max(measured.acceptance_per_pos) < 0.8, measured  # ...and filler drafts rejected


def test_eagle1_head_drafts_like_its_target(tmp_path):
    rates = measure_acceptance(selftest_setups(str(tmp_path), 0, ("eagle",), 3)["eagle"]).acceptance_per_pos
    assert rates[0] > 0.5 and rates[2] > 0.1, rates


@pytest.mark.slow  # the module's selftest run (~5 min on 2 busy cores) is shared by the tests below
def test_one_run_holds_each_methods_rows_and_the_plain_rows_once(mutant_rows):
    table = format_mutation_table(mutant_rows)
    assert {r.method for r in mutant_rows} == {PLAIN, *MUTANT_METHODS}, table
    plain = [(r.seed, r.inject) for r in mutant_rows if r.method == PLAIN]
    assert len(plain) == len(set(plain)), table  # each plain row (clean, each fault it hosts) once per seed
    # the grammar faults run on the constrained rows only, which this run leaves to test_selftest_constrained.py
    assert not any(r.constrained or needs_constrained_decoding(r.inject or "") for r in mutant_rows), table


@pytest.mark.slow  # shares the module's selftest run
def test_selftest_detects_every_fault_on_the_draft_lm_without_false_alarms(mutant_rows):
    mutants = assert_selftest_rows(_method_rows(mutant_rows, "draft"), "draft", MUTANT_SEEDS, constrained=False)
    # The tiny pair's positional heads make draft-side faults cost acceptance; against the shipped reference the
    # baseline flags a drop beyond the smallest one its draft counts detect (stated in the detail).
    flagged = 0
    for name, row in mutants.items():
        baseline = next(r for r in row.results if r.name == "baseline")
        if FAULTS[name].layer != "draft" or name == "draft-state-kept-on-preemption":
            continue
        now = [float(x) for x in baseline.detail.split("acceptance per position ")[1].split(" vs")[0].split()]
        base = [float(x) for x in baseline.detail.split("vs baseline ")[1].split(" (")[0].split()]
        detectable = [float(x) for x in baseline.detail.split("detectable drop ")[1].split(")")[0].split()]
        if any(b - n > 1.3 * d for b, n, d in zip(base, now, detectable)):
            assert not baseline.passed and "dropped at pos" in baseline.detail, f"{name}: {baseline.detail}"
        flagged += not baseline.passed
    assert flagged >= 3, "most acceptance-only faults drop acceptance beyond what 40-60 drafts can explain"


@pytest.mark.slow  # shares the module's selftest run
def test_selftest_detects_every_fault_on_eagle1_without_false_alarms(mutant_rows):
    assert_selftest_rows(_method_rows(mutant_rows, "eagle"), "eagle", MUTANT_SEEDS, constrained=False)


@pytest.mark.slow  # shares the module's selftest run
def test_selftest_detects_every_fault_on_eagle3_without_false_alarms(mutant_rows):
    rows = _method_rows(mutant_rows, "eagle3")
    assert_selftest_rows(rows, "eagle3", MUTANT_SEEDS, constrained=False)  # its tree rows too, the tree mutants
    coverage = selftest_coverage(rows, "cpu")
    assert {"spec.tree_round", "verify.tree", "attention.tree_torch"} <= coverage.taken
    # every production path EAGLE-3 and the plain engine take but the grammar ones, which only the constrained rows
    # take (test_selftest_constrained.py asserts they do; test_selftest_paths.py the whole coverage with them)
    assert all(name.startswith("grammar.") for name in coverage.unexercised), coverage.unexercised


@pytest.mark.slow  # shares the module's selftest run
def test_selftest_detects_every_fault_on_ngram_without_false_alarms(mutant_rows):
    rows = _method_rows(mutant_rows, "ngram")
    assert_selftest_rows(rows, "ngram", MUTANT_SEEDS, constrained=False)
    # every fault an n-gram proposer hosts runs on it (the grammar ones on its constrained row:
    # test_selftest_constrained.py runs every chain grammar fault on every method)
    hosted = {name for name in selftest_faults("cpu") if "ngram" in FAULTS[name].methods}
    ran = {r.inject for r in rows if r.method == "ngram" and r.inject is not None}
    assert ran == {n for n in hosted if not needs_constrained_decoding(n)} and len(ran) >= 4
    assert {n for n in hosted if needs_constrained_decoding(n)} <= {
        m.fault.name for m in GRAMMAR_MUTANTS if not needs_tree_shape(m.fault.name)}


@pytest.mark.slow  # shares the module's selftest run
def test_chunked_rows_pass_clean_take_the_chunked_paths_and_catch_every_chunk_mutant(mutant_rows):
    """Each method's chunked row (greedy and metrics checks only) takes both chunked-prefill paths, and every
    chunked-prefill fault runs there alone and is caught: EAGLE-3 hosts all of them (the target-side ones every method
    does, tests/faults/test_chunk_mutants.py)."""
    chunk_faults = {m.fault.name for m in CHUNK_MUTANTS}
    chunked = [r for r in mutant_rows if r.chunked]
    table = format_mutation_table(chunked)
    assert selftest_ok(chunked), table
    clean = [r for r in chunked if r.inject is None]
    assert [r.method for r in clean] == list(MUTANT_METHODS), table
    for row in clean:
        greedy = next(r for r in row.results if r.name == "greedy")
        assert {"prefill.chunked_mixed", "prefill.chunk_partial"} <= greedy.paths, (row.method, greedy.paths)
        assert {r.name for r in row.results if not r.skipped} == {"greedy", "metrics"}, table
    assert all(r.chunked for r in mutant_rows if r.inject in chunk_faults), table  # inert on whole-prompt rows
    assert {r.inject for r in chunked if r.method == "eagle3" and r.inject} == chunk_faults, table
    assert "eagle3 chunked" in table


@pytest.mark.slow  # n-gram's clean rows on the second seed (the no-bias tied pair), every check: ~3 s
def test_ngram_clean_rows_on_the_second_seed_raise_no_alarm():
    rows = run_selftest(seeds=(1,), methods=("ngram",), faults=(), constrained=False)
    table = format_mutation_table(rows)
    assert [(r.method, r.chunked) for r in rows] == [(PLAIN, False), ("ngram", False), ("ngram", True)], table
    assert not any(r.detected for r in rows), table
    # every seed selftest runs has a shipped baseline; n-gram has no draft model for the oracle to check
    assert [r.name for r in rows[1].results if r.skipped] == ["oracle"], table
