"""The selftest's constrained rows (selftest/constrained.py, issue 46): each method once more with every request under
a grammar, its greedy check (validity judged apart from the engine's grammar code, identity with the plain
constrained reference); the clean rows pass and take the grammar paths, each grammar mutant is caught there (and runs
nowhere else). Without the grammar extra the rows are skipped, saying so, and the grammar paths are not required."""

from __future__ import annotations

import pytest

from specbench.check.budget import BUDGETS
from specbench.errors import SpecbenchError
from specbench.faults.catalog import GRAMMAR_MUTANTS, GRAMMAR_TREE_MUTANTS, needs_tree_shape, selftest_faults
from specbench.selftest import constrained
from specbench.selftest.row_tasks import SeedTask, plan_seed, run_row
from specbench.selftest.runner import METHODS, format_mutation_table, run_selftest, selftest_coverage, selftest_ok

GRAMMAR_FAULTS = tuple(m.fault.name for m in GRAMMAR_MUTANTS)
CHAIN_GRAMMAR_FAULTS = tuple(f for f in GRAMMAR_FAULTS if not needs_tree_shape(f))
TREE_GRAMMAR_FAULTS = tuple(m.fault.name for m in GRAMMAR_TREE_MUTANTS)
GRAMMAR_PATHS = {"grammar.mask", "grammar.draft_cut", "grammar.rebuild", "grammar.reasoning_end_in_drafts"}
TREE_GRAMMAR_PATHS = {"grammar.tree_mask", "grammar.tree_draft_mask"}
needs_llguidance = pytest.mark.skipif(not constrained.is_available(), reason="needs the grammar extra (llguidance)")


def _plan(tmp_path, methods=("ngram", "draft"), checks=("greedy",), trees=False, **options):
    return plan_seed(SeedTask(str(tmp_path), 0, methods, 3, "cpu", None, checks, BUDGETS["fast"], trees=trees,
                              chunked=False, **options)).clean_rows


@needs_llguidance
def test_constrained_rows_are_planned_last_with_a_grammar_per_request(tmp_path):
    rows = _plan(tmp_path)
    assert [(r.method, r.constrained) for r in rows] == [("none", False), ("ngram", False), ("draft", False),
                                                         ("ngram", True), ("draft", True)]
    setup = rows[-1].setup
    # three requests per prompt the plain row's reference covers (the fast budget's 2; run_checks trims them to 2 too)
    assert len(setup.grammars) == len(setup.prompts) == 3 * len(rows[2].context.reference)
    assert any(g.starts_after for g in setup.grammars) and setup.engine.tokenizer is not None
    assert {g.kind for g in setup.grammars} == {"json_schema", "regex"}
    assert rows[-1].context.reference is not None  # the plain constrained reference, computed once here
    assert [r.constrained for r in _plan(tmp_path, checks=("sampled",))] == [False] * 3  # greedy is their check
    assert [r.constrained for r in _plan(tmp_path, constrained=False)] == [False] * 3  # --no-constrained


def test_without_the_grammar_extra_the_rows_are_skipped_saying_so(tmp_path, monkeypatch):
    monkeypatch.setattr("specbench.extras.is_installed", lambda name: name != "grammar")
    assert not set(GRAMMAR_FAULTS) & set(selftest_faults("cpu"))
    rows = _plan(tmp_path, methods=("draft",))
    row = run_row(rows[-1])
    assert row.constrained and not row.detected and [r.detail for r in row.results] == [constrained.NO_EXTRA]
    assert "grammar" in format_mutation_table([row], ("greedy",)) and "llguidance missing" in constrained.NO_EXTRA
    with pytest.raises(SpecbenchError, match="constrained rows only: llguidance missing"):
        run_selftest(faults=GRAMMAR_FAULTS[:1])
    coverage = selftest_coverage([], "cpu")
    assert not GRAMMAR_PATHS & {p.name for p in coverage.required}


def test_grammar_faults_need_a_constrained_row():
    with pytest.raises(SpecbenchError, match="constrained rows only: --no-constrained"):
        run_selftest(faults=GRAMMAR_FAULTS[:1], constrained=False)
    with pytest.raises(SpecbenchError, match="constrained rows only: their check, greedy, is not run"):
        run_selftest(faults=GRAMMAR_FAULTS[:1], checks=("sampled",))


@needs_llguidance
def test_methods_that_draft_trees_get_a_constrained_tree_row(tmp_path):
    rows = _plan(tmp_path, methods=("ngram", "draft"), trees=True)
    constrained_rows = [(r.method, r.shape.is_tree) for r in rows if r.constrained]
    assert constrained_rows == [("ngram", False), ("draft", False), ("draft", True)]
    assert [(r.method, r.constrained) for r in _plan(tmp_path, methods=("draft",), trees=True)
            if r.shape.is_tree] == [("draft", False), ("draft", True)]


@needs_llguidance
@pytest.mark.slow  # every method's constrained row and its 5 grammar mutants, greedy only: ~40 s on 2 busy cores
def test_constrained_rows_pass_clean_and_catch_every_grammar_mutant_on_every_method():
    rows = run_selftest(seeds=(0,), methods=METHODS, faults=GRAMMAR_FAULTS, checks=("greedy",), trees=False,
                        chunked=False, window_moe=False)
    table = format_mutation_table(rows, ("greedy",))
    assert selftest_ok(rows), table
    assert {(r.method, r.inject) for r in rows if r.inject is not None} == {
        (m, f) for m in METHODS for f in CHAIN_GRAMMAR_FAULTS}, table
    assert all(r.constrained for r in rows if r.inject is not None), table  # inert elsewhere: never run there
    coverage = selftest_coverage(rows, "cpu", ("greedy",))
    assert GRAMMAR_PATHS <= coverage.taken and "grammar.violation" not in coverage.taken, coverage.unexercised
    assert GRAMMAR_PATHS <= {p.name for p in coverage.required}


@needs_llguidance
@pytest.mark.slow  # the tree methods' constrained chain and tree rows with their grammar mutants: ~130 s on 2 busy cores
def test_constrained_tree_rows_pass_clean_and_catch_the_grammar_mutants_trees_host():
    methods = ("draft", "eagle3")
    rows = run_selftest(seeds=(0,), methods=methods, faults=GRAMMAR_FAULTS, checks=("greedy",), trees=True,
                        chunked=False, window_moe=False)
    table = format_mutation_table(rows, ("greedy",))
    assert selftest_ok(rows), table
    tree_rows = {(r.method, r.inject) for r in rows if r.inject is not None and r.shape.is_tree}
    assert tree_rows == {(m, f) for m in methods for f in TREE_GRAMMAR_FAULTS}, table
    assert all(r.constrained for r in rows if r.inject is not None), table
    coverage = selftest_coverage(rows, "cpu", ("greedy",))
    assert TREE_GRAMMAR_PATHS <= coverage.taken and "grammar.violation" not in coverage.taken, coverage.unexercised
    assert TREE_GRAMMAR_PATHS <= {p.name for p in coverage.required}
