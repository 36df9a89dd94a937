"""`specbench gate` is not silent until it finishes: the sweep's plan and cell lines, then a line per gate phase
(sweep, probe, each stage judged) on stderr, also without a terminal; --quiet leaves stderr empty."""

from __future__ import annotations

import re

from tests.gate.conftest import engine_args, run_gate_cli


def test_gate_reports_its_phases_on_stderr_and_quiet_silences_them(gate_pair, tmp_path, monkeypatch, capsys):
    args = [*engine_args(gate_pair, k=2), "--num-prompts", "2", "--max-tokens", "6", "--stages", "outputs",
            "--results-dir", str(tmp_path)]
    code, out, err = run_gate_cli(args, monkeypatch, capsys)
    assert code == 0, out + err
    assert re.search(r"^gate 1/2 sweep \(k=0,2; 2 prompts\) \.\.\.$", err, re.M), err
    assert re.search(r"^cell 2/2 \S+ done in \d+s; elapsed", err, re.M), err  # the sweep's own lines, no terminal
    assert re.search(r"^gate 2/2 stage outputs: PASS in \d+s; elapsed \d+s$", err, re.M), err
    code, out, err = run_gate_cli([*args, "--quiet"], monkeypatch, capsys)
    assert code == 0 and err == "", err
