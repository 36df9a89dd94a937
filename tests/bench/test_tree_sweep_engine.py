"""A tree sweep on the embedded engine with real tree rounds (no stand-in): every tree cell's metrics are consistent
and its tree counts are the engine's (tree size = the budget, acceptance per depth read from the rounds)."""

from __future__ import annotations

import pandas as pd
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir

BUDGET = 4


def test_embedded_tree_sweep_records_the_engines_tree_counts(tiny_model_dir, tiny_draft_dir, tmp_path):
    from specbench.cli.app import app

    args = ["sweep", "--target", str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir),
            "--num-steps", "0,2", "--eagle-topk", "1,2", "--num-draft-tokens", str(BUDGET), "--concurrency", "2",
            "--data-dir", str(data_dir()), "--limit", "3", "--shots", "1", "--max-tokens", "8", "--warmup", "0",
            "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path), "--run-id", "trees"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    cells = pd.read_parquet(tmp_path / "trees" / "cells.parquet").set_index("cell_id")
    tree = cells.loc[f"r0-t0-c2-k2-top2-n{BUDGET}"]
    assert tree["tree_size"] == BUDGET
    assert tree["is_metrics_consistent"], tree["metrics_mismatch"]
    requests = pd.read_parquet(tmp_path / "trees" / "requests.parquet")
    rows = requests[requests["cell_id"] == f"r0-t0-c2-k2-top2-n{BUDGET}"]
    assert len(rows) == 3 and all(len(v) > 0 for v in rows["tree_offered_per_depth"])
