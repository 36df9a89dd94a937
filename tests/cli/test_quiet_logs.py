"""Logs without a terminal stay readable: no third-party progress bars (transformers' GGUF de-quantization, hub
downloads) when stderr is not a TTY, and the selftest's path table never marks a path taken while saying its
method did not run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.execution_paths import ExecutionPath
from specbench.runs.environment import QUIET_BARS_ENV, quiet_bars_off_terminal
from specbench.selftest.coverage import PathCoverage, format_coverage

REPO = Path(__file__).resolve().parents[2]


def test_bars_go_off_only_without_a_terminal_and_a_users_setting_wins(monkeypatch):
    for name in QUIET_BARS_ENV:
        monkeypatch.delenv(name, raising=False)
    quiet_bars_off_terminal(True)
    assert not any(name in os.environ for name in QUIET_BARS_ENV)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    quiet_bars_off_terminal(False)
    assert os.environ["TQDM_DISABLE"] == "1" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"


@pytest.mark.slow
def test_a_gguf_conversion_logs_no_progress_bar_off_a_terminal(tiny_model_dir, tmp_path):
    from tests.support.tiny_models import write_gguf

    gguf = write_gguf(tiny_model_dir, tmp_path / "tiny.gguf")
    env = {k: v for k, v in os.environ.items() if k not in QUIET_BARS_ENV}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", SPECBENCH_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-m", "specbench", "generate", "--target", str(gguf), "--prompt", "hi",
                             "--max-tokens", "2", "--device", "cpu", "--kv-cache-gb", "0.02"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "cache" / "gguf").is_dir()  # it converted (where transformers draws its bars)
    assert "de-quantizing" not in result.stderr and "%|" not in result.stderr, result.stderr[-2000:]


def test_the_path_table_never_calls_a_taken_path_unrun():
    paths = (ExecutionPath("a.shared", "taken by another engine", ("cpu",), ("mtp",)),
             ExecutionPath("a.idle", "its method did not run", ("cpu",), ("mtp",)))
    table = format_coverage(PathCoverage("cpu", ("ngram",), ("greedy",), (frozenset({"a.shared"}),), paths))
    shared = next(line for line in table.splitlines() if line.startswith("a.shared"))
    idle = next(line for line in table.splitlines() if line.startswith("a.idle"))
    assert " x " in shared and "method not run" not in shared and "taken by another method" in shared, table
    assert " . " in idle and idle.endswith("production, method not run"), table
