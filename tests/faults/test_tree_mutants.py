"""The tree mutants (faults/tree_*.py): each is inert on chain rounds (the old battery's rows: same tokens, same
acceptance, no invariant raised) and caught on tree rounds of the selftest's seed-0 tiny target: the target-side ones
by greedy output against the plain reference; the mask mutants also by INV-TREE once the debug invariants are on. The
draft-side one (a tree draft step's mask) leaves greedy output exact and lowers acceptance only: the tree draft oracle
catches it (tests/check/test_tree_oracle.py). Hosted by the proposer classes that draft trees, run by the selftest on
its tree rows only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specbench.attention.invariants import InvariantViolation
from specbench.check.greedy import greedy_params, reference_outputs
from specbench.check.result import CheckResult
from specbench.check.setup import build_llm, prompt_list
from specbench.faults.catalog import (
    FAULTS,
    TREE_MUTANTS,
    needs_tree_shape,
    selftest_faults,
)
from specbench.selftest.row_tasks import SelftestRow, due_faults
from specbench.selftest.setups import TREE_SHAPE, selftest_setups, tree_methods
from specbench.speculation.capabilities import DraftsTrees
from specbench.speculation.registry import methods_with

NAMES = [m.fault.name for m in TREE_MUTANTS]
METHODS = ("draft", "eagle3")  # a draft LM (its own tree KV kept) and a head fed target features
# a node sees a wrong number of tree rows (the verify's, or a draft step's)
MASK_MUTANTS = ("tree-mask-sees-sibling", "tree-parent-off-by-one", "tree-draft-sees-sibling")


@pytest.fixture(scope="module")
def seed0(tmp_path_factory):
    """Per method: (setup, plain greedy reference, clean chain run, clean tree run)."""
    setups = selftest_setups(str(tmp_path_factory.mktemp("tree-mutants")), 0, METHODS, 3)
    return {m: (s, [tuple(r) for r in reference_outputs(s)], run(s, None), run(tree(s), None))
            for m, s in setups.items()}


def tree(setup):
    return replace(setup, draft_shape=TREE_SHAPE)


def run(setup, inject: str | None, invariants: bool = False) -> tuple[list[tuple[int, ...]], int]:
    outs = build_llm(setup.with_inject(inject), invariants=invariants).generate(prompt_list(setup),
                                                                              greedy_params(setup))
    return [tuple(o.output_token_ids) for o in outs], sum(o.stats.num_accepted_tokens for o in outs)


def test_tree_mutants_are_hosted_by_the_tree_drafters_and_run_on_tree_rows_only():
    assert len(NAMES) >= 5 and {"tree-mask-sees-sibling", "tree-parent-off-by-one", "tree-kv-not-moved",
                                "tree-bonus-wrong-node", "tree-draft-sees-sibling"} <= set(NAMES)
    for m in TREE_MUTANTS:
        assert m.fault.hosts is DraftsTrees and m.fault.methods == methods_with(DraftsTrees)
        assert needs_tree_shape(m.fault.name)
    for device in ("cpu", "cuda"):
        assert set(NAMES) <= set(selftest_faults(device))
    assert tree_methods(("ngram", "draft", "eagle3")) == ("draft", "eagle3")
    chosen = [m.fault for m in TREE_MUTANTS]
    passed = (CheckResult("greedy", True, "", 0.0),)
    chain_row, tree_row = SelftestRow("draft", 0, None, passed), SelftestRow("draft", 0, None, passed, shape=TREE_SHAPE)
    assert due_faults(chosen, "draft", 0, chain_row, {}) == []
    assert [f.name for f in due_faults(chosen, "draft", 0, tree_row, {})] == NAMES


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", NAMES)
def test_tree_mutant_passes_on_chains_and_is_caught_on_trees(seed0, method, name):
    setup, reference, clean_chain, clean_tree = seed0[method]
    assert clean_chain[0] == reference and clean_tree[0] == reference  # the clean engine: identity either way
    assert run(setup, name) == clean_chain  # chain rounds: same tokens, same acceptance
    run(setup, name, invariants=True)  # ... and no invariant raised
    tokens, _ = run(tree(setup), name)
    if FAULTS[name].layer == "draft":  # drafts only: output exact (acceptance may move or not: the oracle sees it)
        assert tokens == reference
    else:
        assert tokens != reference, f"{name} left the tree rounds' greedy output exact"


@pytest.mark.parametrize("name", NAMES)
def test_inv_tree_catches_the_mask_mutants_only(seed0, name):
    setup = seed0["draft"][0]
    if name in MASK_MUTANTS:
        with pytest.raises(InvariantViolation, match="INV-TREE"):
            run(tree(setup), name, invariants=True)
    else:  # their masks, positions and slots are the clean ones: greedy output catches them
        run(tree(setup), name, invariants=True)
