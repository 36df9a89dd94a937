"""Without a terminal (CI logs, `| tee`) a sweep prints one line per finished cell with elapsed time and an
estimate of what is left; --quiet prints nothing."""

from __future__ import annotations

import re
import sys

import pytest
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir


def _sweep(tiny_model_dir, tmp_path, *extra):
    from specbench.cli.app import app

    args = ["sweep", "--target", str(tiny_model_dir), "--method", "ngram", "-k", "0,2", "--concurrency", "1",
            "--data-dir", str(data_dir()), "--limit", "1", "--shots", "0", "--max-tokens", "3", "--warmup", "0",
            "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path), *extra]
    return CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})


def test_one_line_per_cell_when_not_a_terminal(tiny_model_dir, tmp_path):
    result = _sweep(tiny_model_dir, tmp_path)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("cell ")]
    assert len(lines) == 2, result.stderr
    pattern = r"cell (\d)/2 r0-t0-c1-k\d done in \d+s; elapsed \d+s, about \d+s left"
    assert [re.fullmatch(pattern, line).group(1) for line in lines] == ["1", "2"]
    assert lines[-1].endswith("about 0s left")


def test_quiet_prints_no_progress(tiny_model_dir, tmp_path):
    result = _sweep(tiny_model_dir, tmp_path, "--quiet")
    assert result.exit_code == 0 and "cell 1/2" not in result.stderr


def test_estimate_is_the_mean_cell_time_times_the_cells_left(monkeypatch):
    from specbench.bench.progress import Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    progress = Progress(num_cells=8, num_done=2, quiet=False)
    progress.start, progress.cell_start, progress.num_done, progress.cell_id = 0.0, 50.0, 4, "r0-t0-c4-k3"
    assert progress.cell_line(now=60.0) == "cell 4/8 r0-t0-c4-k3 done in 10s; elapsed 1m00s, about 2m00s left"


def test_a_long_cell_reports_its_requests_without_a_terminal(monkeypatch, capsys):
    from specbench.bench.progress import Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    now = [0.0]
    progress = Progress(num_cells=2, num_done=0, quiet=False, line_interval_s=30.0, clock=lambda: now[0])
    progress.start_cell("r0-t0-c1-k3", 100)
    for _ in range(10):  # 10 requests, 10 s apart: a line at 30 s, 60 s and 90 s
        now[0] += 10.0
        progress.request_done()
    progress.close()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("cell ")]
    assert lines == [f"cell 1/2 r0-t0-c1-k3: {n}/100 requests in {s}" for n, s in ((3, "30s"), (6, "1m00s"),
                                                                                  (9, "1m30s"))]


def test_a_quiet_long_cell_prints_nothing(monkeypatch, capsys):
    from specbench.bench.progress import Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    now = [0.0]
    progress = Progress(num_cells=1, num_done=0, quiet=True, line_interval_s=1.0, clock=lambda: now[0])
    progress.start_cell("r0-t0-c1-k0", None)
    now[0] += 100.0
    progress.request_done()
    progress.close()
    assert capsys.readouterr().err == ""
