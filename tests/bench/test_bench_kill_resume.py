"""A sweep killed with SIGKILL mid-run leaves every completed cell readable; --resume finishes only the rest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from tests.support.tiny_models import data_dir


@pytest.mark.slow
def test_kill_9_then_resume(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "results" / "killed"
    args = [sys.executable, "-m", "specbench", "sweep", "--target", str(tiny_model_dir), "--device", "cpu",
            "--method", "ngram", "--concurrency", "1,2,4", "--num-steps", "0,2", "--data-dir", str(data_dir()),
            "--limit", "4", "--shots", "1", "--max-tokens", "24", "--warmup", "0",
            "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path / "results"), "--run-id", "killed", "--quiet"]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cells_dir = run_dir / "parts" / "cells"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if cells_dir.is_dir() and len(list(cells_dir.glob("*.parquet"))) >= 2:
            break
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.fail(f"the sweep ended before it could be killed: {proc.stderr.read().decode()[-2000:]}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    done = {p.stem for p in cells_dir.glob("*.parquet")}
    assert 2 <= len(done) < 6
    for path in run_dir.glob("*.parquet"):  # consolidated files: whole, and only completed cells
        assert set(pd.read_parquet(path)["cell_id"]) <= done, path.name
    for table in ("cells", "requests", "steps", "categories"):
        parts = pd.read_parquet(run_dir / "parts" / table)
        assert set(parts["cell_id"]) >= done
    before = pd.read_parquet(cells_dir).set_index("cell_id")["start_unix_s"]

    resumed = subprocess.run([sys.executable, "-m", "specbench", "sweep", "--resume", str(run_dir), "--quiet"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{6 - len(done)} cells run, {len(done)} already complete" in resumed.stdout
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("cell_id")
    assert len(cells) == 6 and cells.index.is_unique
    for cell_id in done:
        assert cells.loc[cell_id, "start_unix_s"] == before[cell_id]  # not run again
    assert pd.read_parquet(run_dir / "requests.parquet").groupby("cell_id").size().eq(4).all()
