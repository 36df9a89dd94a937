"""The selftest's sliding-window + MoE tiny target (selftest/tiny_window_moe.py): in the default `specbench selftest`
rows, its reference engine cross-checked against transformers' Qwen3-MoE, its clean rows passing, and the window
mutants caught on it by the battery while inert on the seeds' full-attention targets (every check passes there). The
MoE padding-mask mutant acts on CUDA graphs only: inert on CPU (no graph), caught on CUDA (skipped here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specbench import LLM, SamplingParams
from specbench.attention.kinds import SlidingWindowAttention
from specbench.check.battery import CHECKS
from specbench.check.budget import BUDGETS
from specbench.faults import FAULTS, moe_padding_mask_frozen
from specbench.faults.catalog import (
    MOE_MUTANTS,
    WINDOW_MUTANTS,
    injection,
    selftest_faults,
    window_moe_faults,
)
from specbench.models.config import ModelConfig
from specbench.selftest.hf_reference import hf_greedy
from specbench.selftest.row_tasks import SeedTask, plan_seed, run_row
from specbench.selftest.runner import (
    PLAIN,
    false_alarms,
    format_mutation_table,
    run_selftest,
)
from specbench.selftest.setups import WINDOW_MOE, WINDOW_MOE_METHODS
from specbench.selftest.tiny import random_prompts
from specbench.selftest.tiny_window_moe import (
    NUM_EXPERTS,
    TOP_K,
    WINDOW,
    build_window_moe_pair,
)

WINDOW_FAULTS = tuple(m.fault.name for m in WINDOW_MUTANTS)
MOE_FAULT = MOE_MUTANTS[0].fault.name
DRAFT_SIDE = ("window-not-rebuilt-between-draft-steps", "window-missing-in-catch-up")


def _result(row, name: str):
    return next(r for r in row.results if r.name == name)


def test_window_and_moe_faults_run_on_the_window_moe_target_only():
    assert set(window_moe_faults("cpu")) == set(WINDOW_FAULTS)  # the MoE mutant's path (graph.verify) is CUDA's
    # on CUDA also the default MoE kernel set's prefill GEMM mutant (its path production there, models/moe_kernel_sets.py)
    assert set(window_moe_faults("cuda")) == {*WINDOW_FAULTS, MOE_FAULT, "moe-prefill-rows-shifted"}
    assert not set(window_moe_faults("cuda")) & set(selftest_faults("cuda") + selftest_faults("cpu"))
    assert FAULTS[MOE_FAULT].path == "graph.verify" and FAULTS[MOE_FAULT].layer == "target"


def test_the_target_is_windowed_moe_and_transformers_sees_the_window(tmp_path):
    target, draft = build_window_moe_pair(tmp_path, seed=0)
    for model_dir in (target, draft):
        config = ModelConfig.from_hf(json.loads((Path(model_dir) / "config.json").read_text()))
        assert config.architecture == "qwen3_moe" and config.moe is not None
        assert config.moe.num_experts == NUM_EXPERTS and config.moe.num_experts_per_tok == TOP_K
        assert config.moe_layer_ids == tuple(range(config.num_hidden_layers))
        assert config.attention_kinds == (SlidingWindowAttention(WINDOW),) * config.num_hidden_layers
    prompts = tuple(tuple(p) for p in random_prompts(3, seed=0))
    assert min(map(len, prompts)) > WINDOW  # every prompt outgrows the window
    hf_class, windowed = hf_greedy(target, prompts, 8)
    unwindowed_dir = tmp_path / "unwindowed"
    unwindowed_dir.mkdir()
    for f in Path(target).iterdir():
        (unwindowed_dir / f.name).write_bytes(f.read_bytes())
    config = json.loads((unwindowed_dir / "config.json").read_text())
    (unwindowed_dir / "config.json").write_text(json.dumps({**config, "use_sliding_window": False}))
    assert hf_class == "Qwen3MoeForCausalLM"
    assert hf_greedy(str(unwindowed_dir), prompts, 8)[1] != windowed  # the window shows in the output


@pytest.mark.slow
def test_the_cli_default_runs_the_window_moe_target():
    from specbench.cli.app import app

    args = ["selftest", "--jobs", "1", "--seeds", "0", "--methods", "draft", "--faults", "none", "--checks", "greedy",
            "--no-hybrid"]  # the hybrid target's rows: test_selftest_hybrid.py
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()  # chain rows (a tree row's second word: t2/6)
            if line.split()[:1] in (["none"], ["draft"]) and line.split()[1].isdigit()]
    assert [(r[0], r[2], r[3], r[-1]) for r in rows] == [
        (PLAIN, "biased", "clean", "ok"), ("draft", "biased", "clean", "ok"),
        (PLAIN, WINDOW_MOE, "clean", "ok"), ("draft", WINDOW_MOE, "clean", "ok")], result.output
    assert f"greedy, {PLAIN} seed 0 {WINDOW_MOE} clean:" in result.stdout
    assert "Qwen3MoeForCausalLM greedy (fp32 CPU): 6/6 prompts identical" in result.stdout
    off = CliRunner().invoke(app, [*args, "--no-window-moe"], catch_exceptions=False)
    assert off.exit_code == 0 and WINDOW_MOE not in off.stdout, off.output


@pytest.mark.slow  # the battery on the window + MoE target and seed 0: ~40 s on 2 busy cores
def test_each_window_mutant_is_caught_on_the_window_moe_target():
    # trees=False: the window + MoE target has no tree row (its windows refuse trees), and the seed target's clean
    # draft tree row runs in test_selftest_methods.py and test_selftest_paths.py
    rows = run_selftest(seeds=(0,), methods=WINDOW_MOE_METHODS, faults=WINDOW_FAULTS, window_moe=True, trees=False,
                        chunked=False, constrained=False)  # test_selftest_methods.py, test_selftest_constrained.py
    table = format_mutation_table(rows)
    assert not false_alarms(rows), table
    on_target = [r for r in rows if r.target == WINDOW_MOE]
    assert [(r.method, r.inject, r.shape.is_tree) for r in rows if r.target != WINDOW_MOE] == [
        (PLAIN, None, False), ("draft", None, False)], table
    assert {(r.method, r.inject) for r in on_target} == {
        (PLAIN, None), ("draft", None), *((PLAIN, n) for n in WINDOW_FAULTS if PLAIN in FAULTS[n].methods),
        *(("draft", n) for n in WINDOW_FAULTS)}, table
    clean = next(r for r in on_target if r.method == "draft" and r.inject is None)
    assert not _result(clean, "baseline").skipped, _result(clean, "baseline").detail  # a shipped baseline
    assert "Qwen3MoeForCausalLM" in _result(clean, "greedy").detail  # the HF cross-check of the reference
    for row in (r for r in on_target if r.inject is not None):
        assert row.detected, f"{row.inject} missed:\n{table}"
        if row.inject in DRAFT_SIDE:  # lossless: the draft oracle and INV-KIND see them
            assert _result(row, "greedy").passed, table
            assert not _result(row, "oracle").passed and not _result(row, "invariants").passed, table
        else:  # the target's output departs from the reference (itself equal to transformers')
            assert not _result(row, "greedy").passed, table


@pytest.mark.slow  # 4 rows of the full battery: ~25 s
def test_the_window_mutants_pass_every_check_on_a_full_attention_seed_target(tmp_path):
    plan = plan_seed(SeedTask(str(tmp_path), 0, ("draft",), 3, "cpu", None, CHECKS, BUDGETS["full"]))
    draft = next(t for t in plan.clean_rows if t.method == "draft")
    for name in WINDOW_FAULTS:
        row = run_row(draft.with_inject(name))
        assert not row.detected, f"{name} on the full-attention seed target:\n{format_mutation_table([row])}"


@pytest.mark.slow  # ~4-9 s on 2 busy cores: the -m 'not slow' subset stays under 5 min
def test_the_moe_padding_mask_mutant_is_inert_without_cuda_graphs_and_its_frozen_mask_changes_real_rows(
        tmp_path, monkeypatch):
    target, draft = build_window_moe_pair(tmp_path, seed=0)
    prompts = [list(p) for p in random_prompts(6, seed=0)]
    expected = hf_greedy(target, tuple(map(tuple, prompts)), 16)[1]

    def greedy() -> list[tuple[int, ...]]:
        llm = LLM(target, method="draft", draft=draft, max_num_steps=3, dtype="fp32", device="cpu",
                  fault=injection(MOE_FAULT), debug_invariants=True)
        return [tuple(o.output_token_ids) for o in llm.generate(prompts, SamplingParams(max_tokens=16,
                                                                                        ignore_eos=True))]

    assert greedy() == expected  # eager forwards read the live mask: the CPU never replays a graph
    # Every forward treated as a capture (what a replay of the frozen mask does to its real rows): the output moves.
    monkeypatch.setattr(moe_padding_mask_frozen, "is_capturing", lambda x: True)
    bent = greedy()
    assert sum(a != b for a, b in zip(bent, expected)) == len(expected), (bent, expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_the_moe_padding_mask_mutant_is_caught_on_cuda():
    rows = run_selftest(seeds=(0,), methods=("draft",), faults=(MOE_FAULT,), checks=("greedy", "invariants"),
                        device="cuda", window_moe=True)
    table = format_mutation_table(rows)
    assert not false_alarms(rows), table
    mutant = [r for r in rows if r.inject == MOE_FAULT]
    assert [(r.method, r.target) for r in mutant] == [("draft", WINDOW_MOE)], table
    assert not _result(mutant[0], "greedy").passed, table
