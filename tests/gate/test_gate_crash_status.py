"""A bug inside specbench is told apart from a regression: the stage it hit is CRASH (what raised, where), the
other stages are still judged, the markdown and JUnit reports are still written, and the exit status is
ExitStatus.CRASHED (3), never FAILED (1)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from specbench.errors import ExitStatus
from tests.gate.conftest import engine_args, run_gate_cli
from tests.support.cli_run import run_main


def test_a_stage_that_raises_is_crash_and_the_reports_are_written(gate_pair, tmp_path, monkeypatch, capsys):
    import specbench.gate.accuracy_stage as accuracy

    def explode(*args, **kwargs):
        raise AttributeError("'float' object has no attribute 'strip'")

    monkeypatch.setattr(accuracy, "accuracy_stage", explode)
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--results-dir", str(tmp_path / "runs"),
                                   "--stages", "accuracy,outputs", "--junit", str(junit), "--report-md", str(md)],
                                  monkeypatch, capsys)
    assert code == ExitStatus.CRASHED, out + err
    assert "## specbench gate: CRASH (accuracy)" in out
    row = next(line for line in out.splitlines() if line.startswith("| accuracy |"))
    assert "| CRASH |" in row and "AttributeError" in row and "(at test_gate_crash_status.py:" in row
    assert next(line for line in out.splitlines() if line.startswith("| outputs |")).split("|")[2].strip() == "PASS"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.find("testcase[@name='accuracy']/error") is not None
    assert md.read_text() == out


def test_an_uncaught_bug_exits_crashed_with_one_closing_line(monkeypatch):
    def explode(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("specbench.compare.loading.load_run", explode)
    result = run_main("compare", "a", "b")
    assert result.exit_code == ExitStatus.CRASHED
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("specbench crashed: ZeroDivisionError: division by zero") and "a bug in specbench" in last
    assert "Traceback" in result.stderr  # what a bug report needs
