"""Issue 24: a failure after start-up (a later MT-Bench turn too long for the context, a server gone mid-cell) ends
in one error line naming the cell and the resume command with the completed cells kept; a new run that completed
no cell leaves no run directory."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from specbench.errors import SpecbenchError
from tests.support.tiny_models import data_dir
from tests.support.cli_run import main_exit


def _args(tiny_model_dir, results, *extra: str) -> list[str]:
    return ["sweep", "--target", str(tiny_model_dir), "--method", "ngram", "-k", "0,1", "--concurrency", "1",
            "--data-dir", str(data_dir()), "--limit", "1", "--max-tokens", "4", "--warmup", "0", "--device", "cpu",
            "--kv-cache-gb", "0.02", "--results-dir", str(results), "--run-id", "run", "--quiet", *extra]


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    code, _, err = main_exit(args, monkeypatch, capsys)
    return code, err


def test_a_later_turn_past_the_context_leaves_no_empty_run_directory(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """The sampled MT-Bench question's first turn (125 tokens) fits 140 (the preflight checks first turns only); its second turn,
    with the model's 40-token answer, does not."""
    results = tmp_path / "results"
    args = _args(tiny_model_dir, results, "--workload", "mt_bench", "--max-model-len", "140")
    args[args.index("--max-tokens") + 1] = "40"
    code, err = _main(args, monkeypatch, capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: cell r0-t0-c1-k0 failed: ") and "does not fit max_model_len 140" in err, err
    assert f"no cell completed: {results / 'run'} was removed" in err and not (results / "run").exists()


@pytest.mark.parametrize("failure", [SpecbenchError("the server went away (connection refused)"), KeyboardInterrupt])
def test_a_failure_in_a_later_cell_keeps_the_first_and_says_how_to_resume(failure, tiny_model_dir, tmp_path,
                                                                         monkeypatch, capsys):
    from specbench.bench import sweep

    real_run_cell, calls = sweep.run_cell, []

    def run_cell(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise failure
        return real_run_cell(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_cell", run_cell)
    results = tmp_path / "results"
    args = _args(tiny_model_dir, results)
    at = args.index("--warmup")
    del args[at:at + 2]  # the default warmup: one request per slot (c=1), capped
    code, err = _main(args, monkeypatch, capsys)
    run_dir = results / "run"
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"1 of 2 cells are complete in {run_dir}; " in err and f"specbench sweep --resume {run_dir}" in err
    if isinstance(failure, SpecbenchError):
        assert code == 2 and err.startswith("error: cell r0-t0-c1-k1 failed: the server went away"), err
    else:
        assert code == 130 and err.startswith("interrupted: "), err
    cells = pd.read_parquet(run_dir / "cells.parquet")
    assert len(cells) == 1 and list(cells["num_warmup"]) == [1]
    assert json.loads((run_dir / "manifest.json").read_text())["num_warmup"] == {"1": 1}  # what ran, not None


def test_ctrl_c_in_the_first_cell_of_a_new_run_removes_it(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from specbench.bench import sweep

    def run_cell(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_cell", run_cell)
    results = tmp_path / "results"
    code, err = _main(_args(tiny_model_dir, results), monkeypatch, capsys)
    assert code == 130 and err == f"interrupted: no cell completed: {results / 'run'} was removed\n", err
    assert not (results / "run").exists()
