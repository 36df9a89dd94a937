"""The tree mutants (faults/tree_*.py): each is inert on chain rounds (the old battery's rows: same tokens, same
acceptance, no invariant raised) and caught on tree rounds of the selftest's seed-0 tiny target: the target-side ones
by greedy output against the plain reference; the mask mutants also by INV-TREE once the debug invariants are on. The
draft-side one (a tree draft step's mask) leaves greedy output exact and lowers acceptance only: the tree draft oracle
catches it (tests/check/test_tree_oracle.py). Hosted by the proposer classes that draft trees, run by the selftest on
its tree rows only."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.check.greedy import greedy_params, reference_outputs
from specbench.check.result import CheckResult
from specbench.check.setup import build_llm, prompt_list
from specbench.faults.catalog import (
    FAULTS,
    TREE_MUTANTS,
    needs_tree_shape,
    selftest_faults,
)
from specbench.faults.tree_draft_sibling import _bend
from specbench.selftest.row_tasks import SelftestRow, due_faults
from specbench.selftest.setups import TREE_SHAPE, selftest_setups, tree_methods
from specbench.speculation.capabilities import DraftsTrees
from specbench.speculation.registry import methods_with
from specbench.speculation.tree.device import block_table_tensor, grow_tree_on_device
from specbench.speculation.tree.step import StepLayout
from specbench.speculation.tree.plan import TreePlan

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


def device_step_mds(read_back: bool) -> list[tuple[torch.Tensor, int, object]]:
    """(frontier parents [2, 3], first row, metadata) of every draft step of one device-path round (2 requests)."""
    block_tables = block_table_tensor(((0, 1, 2, 3), (4, 5, 6, 7)), torch.device("cpu"))
    layout = StepLayout(torch.tensor([4, 6]), block_tables, 4, 32, prefix_lens=(4, 6), read_back=read_back)
    seen = []

    def run_step(step):
        seen.append((step.frontier.parent, step.first_row, step.md))
        return torch.log_softmax(torch.cos(step.frontier.token_ids[..., None] * torch.arange(1.0, 12.0) * 0.7), -1)

    root = torch.log_softmax(torch.sin(torch.arange(22.0).view(2, 11) * 1.3), -1)
    grow_tree_on_device(TreePlan(3, 4, 9), root, layout, run_step)
    return seen


def test_draft_sibling_bend_on_device_step_metadata(monkeypatch):
    """tree-draft-sees-sibling bends the device path's draft-step mask by tensor ops: a query also sees the row fed
    before its own when both nodes share their parent (the builder's own parent link), steps >= 2 only (step 1 is
    the verify layout); the host copy follows where the step carries one, and without one nothing is read back (the
    bend is capturable in the tree draft graphs)."""
    num_siblings = 0
    for parent, first, md in device_step_mds(read_back=True):
        bent = _bend(md)
        if md.tree.is_verify:
            assert bent is md
            continue
        expected = md.tree.mask.clone().view(2, 3, -1)
        for r in range(2):
            for q in range(1, 3):
                if parent[r, q] == parent[r, q - 1]:
                    expected[r, q, first + q - 1] = True
                    num_siblings += 1
        assert torch.equal(bent.tree.mask, expected.view(6, -1)) and torch.equal(bent.tree.mask_cpu, bent.tree.mask)
    assert num_siblings > 0  # the round has adjacent siblings to bend
    quiet = [md for *_, md in device_step_mds(read_back=False) if not md.tree.is_verify]
    for name in ("tolist", "item", "__bool__", "__int__", "__index__", "cpu", "numpy", "nonzero"):
        monkeypatch.setattr(torch.Tensor, name, lambda *a, **k: pytest.fail("a host read in the bend"))
    bent = [_bend(md).tree for md in quiet]
    monkeypatch.undo()
    assert all(tree.mask_cpu.shape[0] == 0 for tree in bent)
    loud = [_bend(md).tree.mask for *_, md in device_step_mds(read_back=True) if not md.tree.is_verify]
    assert all(torch.equal(a.mask, b) for a, b in zip(bent, loud))
