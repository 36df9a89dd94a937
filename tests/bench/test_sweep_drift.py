"""The sweep brackets each (repeat, temperature, concurrency) group with k = 0 drift probes and stores the flags;
an interrupted group keeps its cells (drift unmeasured) and --resume finishes exactly the missing ones."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.support.tiny_models import data_dir
from tests.support.cli_run import main_exit


def _args(tiny_model_dir, results, *extra: str) -> list[str]:
    return ["sweep", "--target", str(tiny_model_dir), "--method", "ngram", "-k", "0,1", "--concurrency", "1,2",
            "--data-dir", str(data_dir()), "--limit", "2", "--shots", "1", "--max-tokens", "4", "--warmup", "0",
            "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(results), "--run-id", "run", *extra]


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    return main_exit(args, monkeypatch, capsys)


def test_drift_probes_flag_cells_and_resume_finishes_the_missing_ones(tiny_model_dir, tmp_path, monkeypatch,
                                                                      capsys):
    from specbench.bench import sweep

    # Synthetic probe throughputs: the resumed session's c=2 group sees the machine 99% slower by its end probe.
    probes = iter([100.0, 100.0, 1.0])  # c=1 start (interrupted); resumed: c=2 start, end
    probed = []
    monkeypatch.setattr(sweep, "run_probe", lambda *args: probed.append(args[3].cell_id + "/" + args[-1])
                        or next(probes))
    real_run_cell, calls = sweep.run_cell, []

    def run_cell(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # r0-t0-c1-k1: its group's start probe ran, its k = 0 cell is written
            raise KeyboardInterrupt
        return real_run_cell(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_cell", run_cell)
    results = tmp_path / "results"
    code, _, err = _main(_args(tiny_model_dir, results, "--quiet"), monkeypatch, capsys)
    assert code == 130, err
    assert probed == ["r0-t0-c1-k0/start"]
    run_dir = results / "run"
    cells = pd.read_parquet(run_dir / "cells.parquet")
    assert list(cells["cell_id"]) == ["r0-t0-c1-k0"] and list(cells["run_index"]) == [0]
    assert cells["baseline_drift"].isna().all()  # its group never reached the end probe

    monkeypatch.setattr(sweep, "run_cell", real_run_cell)
    code, out, err = _main(["sweep", "--resume", str(run_dir)], monkeypatch, capsys)
    assert code == 0, err
    assert "3 cells run, 1 already complete" in out
    # the c=1 group's k = 0 ran in the first session: no probe can bracket both, only the c=2 group is probed
    assert probed == ["r0-t0-c1-k0/start", "r0-t0-c2-k0/start", "r0-t0-c2-k0/end"]
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("cell_id")
    parts = pd.read_parquet(run_dir / "parts" / "cells").set_index("cell_id")
    assert list(cells.index) == ["r0-t0-c1-k0", "r0-t0-c1-k1", "r0-t0-c2-k0", "r0-t0-c2-k1"]
    assert list(cells["run_index"]) == [0, 1, 2, 3]
    assert cells["baseline_drift"].equals(parts.loc[cells.index, "baseline_drift"])  # parts and table agree
    assert cells["baseline_drift"].iloc[:2].isna().all()
    assert cells.loc[["r0-t0-c2-k0", "r0-t0-c2-k1"], "baseline_drift"].tolist() == pytest.approx([-0.99, -0.99])
    assert cells.loc["r0-t0-c2-k1", "is_drift_suspect"] == True  # noqa: E712 (any speedup in [1/100, 100])
    assert pd.isna(cells.loc["r0-t0-c1-k1", "is_drift_suspect"])
    assert "(~)" in out and "WARNING: 1 of 2 speedups lie within the baseline drift" in out
    assert "speedups flagged" in out.splitlines()[0]

@pytest.mark.slow
def test_cpu_hog_halfway_through_a_real_sweep_is_flagged(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """Real probes on a real (tiny) sweep: busy-loop processes start as the second repeat's cells begin (after its
    start probe), so that group's end probe sees a slower machine and its speedups are flagged as drift."""
    from specbench.bench import sweep

    hogs: list[subprocess.Popen] = []
    real_run_cell = sweep.run_cell

    def run_cell(backend, planner, samples, key, *args, **kwargs):
        if key.repeat == 1 and not hogs:
            num_hogs = 4 * len(os.sched_getaffinity(0))  # every core busy four times over
            hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(num_hogs))
        return real_run_cell(backend, planner, samples, key, *args, **kwargs)

    monkeypatch.setattr(sweep, "run_cell", run_cell)
    results = tmp_path / "results"
    args = _args(tiny_model_dir, results, "--quiet", "--repeats", "2", "-k", "0,1,2", "--concurrency", "1",
                 "--max-tokens", "12")
    try:
        code, out, err = _main(args, monkeypatch, capsys)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert code == 0, err
    cells = pd.read_parquet(results / "run" / "cells.parquet").set_index("cell_id")
    assert list(cells.sort_values("run_index").index) == ["r0-t0-c1-k0", "r0-t0-c1-k1", "r0-t0-c1-k2",
                                                          "r1-t0-c1-k0", "r1-t0-c1-k2", "r1-t0-c1-k1"]
    hogged = cells[cells["repeat"] == 1]
    assert (hogged["baseline_drift"] < -0.25).all(), hogged["baseline_drift"]  # the end probe ran slower
    assert hogged.loc[hogged["num_steps"] > 0, "is_drift_suspect"].any()
    assert "(~)" in out and "lie within the baseline drift" in out
