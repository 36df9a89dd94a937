"""`--target default` / `--draft default` resolve the default-model alias in every command that takes a model."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir


@pytest.fixture
def default_is_tiny(tiny_model_dir, monkeypatch):
    """The alias resolves to the tiny checkpoint (the real default needs the hub or the packaged GGUF)."""
    from specbench.models import default_model

    monkeypatch.setattr(default_model, "_resolve_default", lambda: str(tiny_model_dir))


COMMANDS = {
    "check": ["check", "--checks", "greedy", "--max-tokens", "4", "-k", "2"],
    "generate": ["generate", "-p", "hello", "--max-tokens", "4", "-k", "2", "--device", "cpu"],
    "sweep": ["sweep", "--data-dir", str(data_dir()), "--limit", "1", "--shots", "1", "--max-tokens", "3", "-k", "2",
              "--warmup", "0", "--device", "cpu", "--kv-cache-gb", "0.02", "--quiet", "--no-speedup"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_target_and_draft_default(command, default_is_tiny, tmp_path, monkeypatch):
    from specbench.cli.app import app

    monkeypatch.chdir(tmp_path)
    args = [*COMMANDS[command], "--target", "default", "--method", "draft", "--draft", "default"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, (result.output, result.exception)
