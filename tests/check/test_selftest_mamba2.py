"""The selftest's Mamba-2 hybrid tiny target (selftest/tiny_mamba2.py): a Bamba written deterministically per seed,
run with the hybrid target on the first seed (plain and n-gram, the greedy check); its reference engine
cross-checked against transformers' BambaForCausalLM, its rows passing, the Mamba-2 mixer's paths production and
taken there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.check.budget import BUDGETS
from specbench.models.config import ModelConfig
from specbench.selftest.coverage import format_coverage
from specbench.selftest.row_tasks import SeedTask, plan_seed, run_row
from specbench.selftest.runner import PLAIN, false_alarms, format_mutation_table, selftest_coverage
from specbench.selftest.setups import MAMBA2, MAMBA2_METHODS

MAMBA2_PATHS = {"hybrid.mamba2_verify", "hybrid.mamba2_chunked"}
CHECKS = ("greedy", "rows", "invariants")


def test_the_target_is_a_mamba2_hybrid_deterministic_per_seed(tmp_path):
    from specbench.selftest.tiny_mamba2 import build_mamba2_target

    target = build_mamba2_target(tmp_path / "a", seed=1)
    again = build_mamba2_target(tmp_path / "b", seed=1)
    other = build_mamba2_target(tmp_path / "c", seed=2)
    weights = (Path(target) / "model.safetensors").read_bytes()
    assert weights == (Path(again) / "model.safetensors").read_bytes()
    assert weights != (Path(other) / "model.safetensors").read_bytes()
    config = ModelConfig.from_hf(json.loads((Path(target) / "config.json").read_text()))
    assert config.is_hybrid and config.mamba2 is not None and config.gated_delta_net is None


@pytest.mark.slow  # the two rows' greedy checks (HF cross-check, shared-prefix scenario): 5 s idle, ~45 s busy
def test_the_mamba2_rows_pass_and_reach_its_paths(tmp_path):
    plan = plan_seed(SeedTask(str(tmp_path), 0, MAMBA2_METHODS, 3, "cpu", None, CHECKS, BUDGETS["full"], MAMBA2))
    rows = [run_row(task) for task in plan.clean_rows]
    table = format_mutation_table(rows, CHECKS)
    assert [r.method for r in rows] == [PLAIN, *MAMBA2_METHODS], table
    assert not false_alarms(rows), table
    for row in rows:
        greedy = next(r for r in row.results if r.name == "greedy")
        assert not greedy.skipped and "BambaForCausalLM" in greedy.detail, greedy.detail
        assert "6/6 prompts identical" in greedy.detail, greedy.detail
        assert MAMBA2_PATHS <= greedy.paths, table
        assert all(r.skipped for r in row.results if r.name != "greedy"), table  # the greedy check only
    coverage = selftest_coverage(rows, "cpu", ("greedy",))
    required = {p.name for p in coverage.required}
    assert MAMBA2_PATHS <= required and MAMBA2_PATHS <= coverage.taken, format_coverage(coverage)
