"""The tree draft oracle on CUDA, on the configuration the selftest runs there (tree draft steps on the Triton tree
kernel, tree verifies from CUDA graphs): clean tree rows of every tree-drafting method pass, and the draft-side tree
mutant (a draft step's mask showing a sibling) is caught on each; the recorded rounds ran the device tree path eagerly,
never the tree graphs (the graphs carry the mutant too: tests/engine/test_tree_draft_graphs_cuda.py). The CPU
counterparts: test_tree_oracle.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specbench.check.battery import run_checks
from specbench.check.oracle import check_oracle
from specbench.selftest.runner import selftest_setups
from specbench.selftest.setups import TREE_SHAPE, tree_methods

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

METHODS = tree_methods(("draft", "eagle", "eagle3", "mtp"))


@pytest.fixture(scope="module")
def cuda_setups(tmp_path_factory):
    return selftest_setups(str(tmp_path_factory.mktemp("tree_oracle_gpu")), 0, METHODS, 3, device="cuda")


@pytest.mark.parametrize("method", METHODS)
def test_gpu_tree_oracle_passes_clean_and_catches_a_draft_step_seeing_a_sibling(cuda_setups, method):
    setup = dataclasses.replace(cuda_setups[method], draft_shape=TREE_SHAPE)
    (clean,) = run_checks(setup, ("oracle",))  # the battery's way: with the paths its engines took
    assert clean.passed and not clean.skipped and "tree-round laws" in clean.detail, clean.detail
    assert "spec.tree_round" in clean.paths, sorted(clean.paths)
    # recorded on the device path run eagerly: a recorder makes tree rounds skip their graphs (tree/records.py)
    assert not clean.paths & {"eagle.tree_graph", "eagle.tree_round_graph", "draft.tree_graph"}, sorted(clean.paths)
    assert clean.paths & {"eagle.eager", "draft.eager_step"}, sorted(clean.paths)
    bent = check_oracle(setup.with_inject("tree-draft-sees-sibling"), preemption=False)
    assert not bent.passed and "law at depth" in bent.detail, bent.detail
