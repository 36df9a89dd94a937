"""The gate's stress stage (opt-in): not run or listed without `--stages ...,stress`; asked for, a fault that only
corrupts a batch of 8 passes every gentle stage and fails the stress stage at concurrency 8."""

from __future__ import annotations

import pytest

from specbench.gate.stages import DEFAULT_STAGES, STAGES, check_requested, listed
from tests.gate.conftest import engine_args, run_gate_cli


def test_the_stress_stage_runs_only_when_asked_for():
    assert "stress" in STAGES and "stress" not in DEFAULT_STAGES
    assert check_requested(None) == DEFAULT_STAGES and "stress" not in listed(DEFAULT_STAGES)
    assert check_requested("outputs,stress") == ("outputs", "stress") and listed(("stress",))[-1] == "stress"


@pytest.mark.slow
def test_a_condition_fault_fails_only_the_stress_stage(gate_pair, tmp_path, monkeypatch, capsys):
    args = [*engine_args(gate_pair), "--results-dir", str(tmp_path), "--inject", "corrupt-at-batch-8",
            "--stages", "lossless,outputs,stress", "--stress-requests", "4",
            "--stress-conditions", "gentle,concurrency-8", "--quiet"]
    code, out, err = run_gate_cli(args, monkeypatch, capsys)
    assert code == 1, out + err
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1] for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| stage")}
    assert rows["lossless"] == "PASS" and rows["outputs"] == "PASS" and rows["stress"] == "FAIL", out
    assert "FAIL at concurrency-8" in out and "passes at gentle" in out
    assert out.startswith("## specbench gate: FAIL (stress)")
