"""`specbench demo`: what its help says (shots, questions, tokens) is what it runs."""

from __future__ import annotations

import re

from typer.testing import CliRunner


class _Stop(Exception):
    pass


def test_help_and_run_agree_on_shots(monkeypatch):
    from specbench.bench import sweep
    from specbench.cli.app import app

    runs = []

    def fake_run_sweep(config, explicit=None):
        runs.append(config)
        raise _Stop

    monkeypatch.setattr(sweep, "run_sweep", fake_run_sweep)
    result = CliRunner().invoke(app, ["demo"])
    assert isinstance(result.exception, _Stop) and len(runs) == 1
    config = runs[0]
    help_text = " ".join(CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "300"}).output.split())
    assert f"GSM8K {config.shots}-shot subset ({config.limit} questions, {config.max_tokens} new tokens)" in help_text
    assert re.search(rf"--shots\s.*\[default: {config.shots}\]", help_text)
    assert config.workload == "gsm8k" and config.engine.method == "ngram"
