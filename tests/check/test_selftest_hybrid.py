"""The selftest's hybrid tiny target (selftest/tiny_hybrid.py, issue 45): a Qwen3-Next written deterministically per
seed, in the default `specbench selftest` rows; its reference engine cross-checked against transformers'
Qwen3NextForCausalLM, its clean rows passing on several seeds. Every hybrid-state mutant caught on it by the battery
(greedy identity or INV-STATE), and its state paths production and taken there: test_selftest_paths.py, whose seed-0
selftest run holds the hybrid rows (seed 0's rows on the seed target run once for both files' tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.check.battery import CHECKS
from specbench.check.budget import BUDGETS
from specbench.errors import SpecbenchError
from specbench.faults.catalog import (HYBRID_GRAPH_MUTANTS, HYBRID_KERNEL_MUTANTS, HYBRID_MUTANTS, hybrid_faults,
                                      needs_hybrid_target, selftest_faults, window_moe_faults)
from specbench.models.config import ModelConfig
from specbench.selftest.row_tasks import SeedTask, plan_seed, run_row
from specbench.selftest.runner import PLAIN, false_alarms, format_mutation_table, run_selftest
from specbench.selftest.setups import HYBRID, HYBRID_METHODS, HYBRID_TREE_METHODS
from specbench.speculation.registry import execution_path

HYBRID_FAULTS = tuple(m.fault.name for m in HYBRID_MUTANTS)
# the snapshot paths: the greedy check's shared-prefix scenario (check/prefix_scenario.py) hits on the hybrid target
STATE_PATHS = {"hybrid.state_write", "hybrid.state_commit", "hybrid.snapshot_take", "hybrid.snapshot_restore"}


def test_hybrid_faults_run_on_the_hybrid_target_only():
    # the hybrid graph mutants and the fused kernels' where those are production (CUDA: graphs, and
    # --recurrent-kernels auto takes the triton kernels there; the gated attention's once no longer opt-in:
    # models/pending_fusions.py), the state mutants everywhere
    graph_faults = tuple(m.fault.name for m in HYBRID_GRAPH_MUTANTS)
    kernel_faults = tuple(m.fault.name for m in HYBRID_KERNEL_MUTANTS
                          if "cuda" in execution_path(m.fault.path).production_on)
    assert graph_faults and kernel_faults and hybrid_faults("cpu") == HYBRID_FAULTS
    assert hybrid_faults("cuda") == HYBRID_FAULTS + graph_faults + kernel_faults
    for device in ("cpu", "cuda"):
        assert not set(hybrid_faults(device)) & set(selftest_faults(device) + window_moe_faults(device))
        assert all(needs_hybrid_target(name) for name in hybrid_faults(device))
    with pytest.raises(SpecbenchError, match="runs on the selftest's hybrid target"):
        run_selftest(seeds=(0,), methods=("draft",), faults=HYBRID_FAULTS[:1])  # hybrid off: it would be missed
    # the tree verify's mutant needs the hybrid tree row: trees on and a method of HYBRID_TREE_METHODS
    for options in ({"trees": False, "methods": HYBRID_METHODS}, {"methods": ("ngram",)}):
        with pytest.raises(SpecbenchError, match="runs on the selftest's hybrid tree row"):
            run_selftest(seeds=(0,), faults=("state-tree-sibling",), hybrid=True, **options)


def test_the_target_is_hybrid_deterministic_per_seed_and_its_draft_lm_is_not(tmp_path):
    from specbench.selftest.tiny_hybrid import build_hybrid_pair

    target, draft = build_hybrid_pair(tmp_path / "a", seed=1)
    again, _ = build_hybrid_pair(tmp_path / "b", seed=1)
    other, _ = build_hybrid_pair(tmp_path / "c", seed=2)
    weights = (Path(target) / "model.safetensors").read_bytes()
    assert weights == (Path(again) / "model.safetensors").read_bytes()  # same seed, same bytes
    assert weights != (Path(other) / "model.safetensors").read_bytes()
    configs = [ModelConfig.from_hf(json.loads((Path(d) / "config.json").read_text())) for d in (target, draft)]
    assert configs[0].is_hybrid and not configs[1].is_hybrid
    assert configs[0].vocab_size == configs[1].vocab_size


@pytest.mark.slow
def test_the_cli_default_runs_the_hybrid_target():
    from specbench.cli.app import app

    args = ["selftest", "--jobs", "1", "--seeds", "0", "--methods", "draft", "--faults", "none", "--checks",
            "greedy", "--no-window-moe", "--no-chunked"]  # trees: the tree paths are production
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()  # chain rows (a tree row's second word: t2/6)
            if line.split()[:1] in ([PLAIN], ["draft"]) and line.split()[1].isdigit()]
    assert [(r[0], r[2], r[3], r[-1]) for r in rows] == [
        (PLAIN, "biased", "clean", "ok"), ("draft", "biased", "clean", "ok"),
        (PLAIN, HYBRID, "clean", "ok"), ("draft", HYBRID, "clean", "ok")], result.output
    assert "Qwen3NextForCausalLM greedy (fp32 CPU): 6/6 prompts identical" in result.stdout
    # the hybrid target's tree row: the run's first method of HYBRID_TREE_METHODS (the draft LM here)
    assert any(line.split()[:2] == ["draft", "t2/6"] and HYBRID in line.split() for line in result.stdout.splitlines())
    for path in STATE_PATHS | {"hybrid.tree_verify"}:  # production on CPU once the hybrid target runs, and taken
        assert any(line.startswith(path) and line.endswith("production") for line in result.stdout.splitlines())
    off = CliRunner().invoke(app, [*args, "--no-hybrid"], catch_exceptions=False)
    assert off.exit_code == 0 and HYBRID not in off.stdout.split("path (")[0], off.output


@pytest.mark.slow  # the clean hybrid rows of another seed than the mutants', the full battery: ~1 min
@pytest.mark.parametrize("seed", [1])
def test_clean_hybrid_rows_pass_on_other_seeds(tmp_path, seed):
    plan = plan_seed(SeedTask(str(tmp_path), seed, HYBRID_METHODS, 3, "cpu", None, CHECKS, BUDGETS["full"], HYBRID))
    rows = [run_row(task) for task in plan.clean_rows]
    assert [r.method for r in rows] == [PLAIN, *HYBRID_METHODS, HYBRID_TREE_METHODS[0]]  # then the tree row
    assert not false_alarms(rows), format_mutation_table(rows)
    assert all(not r.skipped for row in rows[1:] for r in row.results if r.name in ("sampled", "baseline"))
