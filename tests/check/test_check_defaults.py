"""`specbench check` with nothing but a target: n-gram drafts (a drafter every target has), --device auto, data
found as `sweep` finds it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir


class _Stop(Exception):
    pass


def _engine_of(monkeypatch, *args) -> dict:
    import specbench.check.engine_defaults as defaults

    seen = {}

    def capture(**values):
        seen.update(values)
        raise _Stop

    monkeypatch.setattr(defaults, "check_engine", capture)
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["check", "--data-dir", str(data_dir()), *args])
    assert isinstance(result.exception, _Stop), result.output
    return seen


def test_defaults_work_with_the_default_target(monkeypatch):
    engine = _engine_of(monkeypatch)
    assert engine["method"] == "ngram" and engine["draft"] is None and engine["device"] == "auto"
    assert engine["target"] == "default"


def test_a_draft_model_means_the_draft_method_unless_told(monkeypatch):
    assert _engine_of(monkeypatch, "--draft", "./small")["method"] == "draft"
    assert _engine_of(monkeypatch, "--draft", "./head", "--method", "eagle3")["method"] == "eagle3"


def test_prompts_are_found_like_sweep_finds_data(monkeypatch, tmp_path):
    import specbench.workloads.data as data
    from specbench.check.prompts import check_prompts
    from specbench.errors import SpecbenchError

    root = data_dir()
    monkeypatch.delenv("SPECBENCH_DATA_DIR", raising=False)
    monkeypatch.setattr(data, "default_data_dirs", lambda: [root])
    assert len(check_prompts(None)) == 8
    monkeypatch.setattr(data, "default_data_dirs", lambda: [tmp_path / "missing"])
    with pytest.raises(SpecbenchError, match="check needs local prompts"):
        check_prompts(None)
