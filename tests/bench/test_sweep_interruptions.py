"""A sweep stopped by a full disk or Ctrl-C keeps every completed cell, says how to resume, and `--resume`
finishes it (global step numbering included); an unreadable part makes its cell run again."""

from __future__ import annotations

import errno
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support.tiny_models import data_dir
from tests.support.cli_run import main_exit

NUM_CELLS = 3


def _args(tiny_model_dir, results, *extra: str) -> list[str]:
    return ["sweep", "--target", str(tiny_model_dir), "--method", "ngram", "-k", "0,1,2", "--concurrency", "1",
            "--data-dir", str(data_dir()), "--limit", "2", "--shots", "1", "--max-tokens", "4", "--warmup", "0",
            "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(results), "--run-id", "run", "--quiet",
            *extra]


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    return main_exit(args, monkeypatch, capsys)


def _resume(run_dir, monkeypatch, capsys) -> str:
    from specbench.cli.app import app
    from typer.testing import CliRunner

    monkeypatch.undo()
    result = CliRunner().invoke(app, ["sweep", "--resume", str(run_dir), "--quiet"], env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def _assert_complete_with_global_steps(run_dir, kept: set[str]) -> None:
    cells = pd.read_parquet(run_dir / "cells.parquet")
    assert len(cells) == NUM_CELLS and cells["cell_id"].is_unique
    steps = pd.read_parquet(run_dir / "steps.parquet")
    assert steps["step"].is_unique  # global over the sweep, across sessions
    before = steps[steps["cell_id"].isin(kept)]["step"]
    after = steps[~steps["cell_id"].isin(kept)]["step"]
    assert len(after) and after.min() > before.max()


def test_disk_full_is_one_error_line_and_resume_finishes(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from specbench.bench import store

    real_write, calls = pq.write_table, []

    def write_table(table, where, *args, **kwargs):
        calls.append(where)
        if len(calls) >= 10:  # cell 1: 4 parts + 4 tables; cell 2's second part fails
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, *args, **kwargs)

    monkeypatch.setattr(store.pq, "write_table", write_table)
    results = tmp_path / "results"
    code, _, err = _main(_args(tiny_model_dir, results), monkeypatch, capsys)
    run_dir = results / "run"
    assert code == 2, err
    assert err.startswith("error: cannot write ") and err.strip().count("\n") == 0, err
    assert "parts/steps/" in err and "No space left on device" in err
    assert f"1 of {NUM_CELLS} cells are complete" in err and f"specbench sweep --resume {run_dir}" in err
    kept = set(pd.read_parquet(run_dir / "cells.parquet")["cell_id"])
    assert len(kept) == 1 and set(pd.read_parquet(run_dir / "parts" / "cells")["cell_id"]) == kept
    assert not (run_dir / ".tmp").exists() or not list((run_dir / ".tmp").iterdir())  # no half-written file

    output = _resume(run_dir, monkeypatch, capsys)
    assert f"{NUM_CELLS - 1} cells run, 1 already complete" in output
    _assert_complete_with_global_steps(run_dir, kept)


def test_ctrl_c_keeps_completed_cells_and_says_how_to_resume(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from specbench.bench import sweep

    real_run_cell, calls = sweep.run_cell, []

    def run_cell(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_run_cell(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_cell", run_cell)
    results = tmp_path / "results"
    code, _, err = _main(_args(tiny_model_dir, results), monkeypatch, capsys)
    run_dir = results / "run"
    assert code == 130, err
    assert err.strip() == (f"interrupted: 2 of {NUM_CELLS} cells are complete in {run_dir}; "
                           f"finish with: specbench sweep --resume {run_dir}")
    kept = set(pd.read_parquet(run_dir / "cells.parquet")["cell_id"])
    assert len(kept) == 2

    output = _resume(run_dir, monkeypatch, capsys)
    assert "1 cells run, 2 already complete" in output
    _assert_complete_with_global_steps(run_dir, kept)


@pytest.mark.parametrize("table", ["requests", "cells"])
def test_unreadable_part_reruns_its_cell(table, tiny_model_dir, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    assert _main(_args(tiny_model_dir, results), monkeypatch, capsys)[0] == 0
    run_dir = results / "run"
    cell_id = pd.read_parquet(run_dir / "cells.parquet")["cell_id"].iloc[1]
    broken = run_dir / "parts" / table / f"{cell_id}.parquet"
    broken.write_bytes(broken.read_bytes()[: len(broken.read_bytes()) // 2])  # truncated: no parquet footer

    code, out, err = _main(["sweep", "--resume", str(run_dir), "--quiet"], monkeypatch, capsys)
    assert code == 0, err
    assert f"note: {broken} is unreadable" in err and f"cell {cell_id} runs again" in err, err
    assert "Traceback" not in err
    assert f"1 cells run, {NUM_CELLS - 1} already complete" in out
    assert len(pd.read_parquet(run_dir / "cells.parquet")) == NUM_CELLS
    assert (pd.read_parquet(run_dir / "requests.parquet")["cell_id"] == cell_id).sum() == 2


@pytest.mark.slow
def test_real_sigint_from_the_command_line(tiny_model_dir, tmp_path):
    """Ctrl-C as a terminal sends it: SIGINT to a running `specbench sweep` process."""
    import os
    import signal
    import subprocess
    import time

    results = tmp_path / "results"
    args = [sys.executable, "-m", "specbench", *_args(tiny_model_dir, results)]
    args[args.index("--max-tokens") + 1] = "24"  # cells long enough that the signal lands mid-sweep
    args[args.index("--limit") + 1] = "4"
    # A shell without job control starts background jobs with SIGINT ignored, and the child would inherit that
    # (Python then installs no KeyboardInterrupt handler): give it the disposition a terminal's process has.
    proc = subprocess.Popen(args, env=dict(os.environ, HF_HUB_OFFLINE="1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    cells_dir = results / "run" / "parts" / "cells"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not list(cells_dir.glob("*.parquet")):
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.fail(f"the sweep ended before it could be interrupted: {proc.stderr.read()[-2000:]}")
    os.kill(proc.pid, signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    kept = len(list(cells_dir.glob("*.parquet")))
    assert proc.returncode == 130, err
    assert f"interrupted: {kept} of {NUM_CELLS} cells are complete in {results / 'run'}; " in err
    assert f"finish with: specbench sweep --resume {results / 'run'}" in err and "Traceback" not in err
