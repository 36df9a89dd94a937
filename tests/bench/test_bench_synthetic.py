"""`--synthetic-acceptance` through the sweep CLI: forced rates reach the engine and every output says so."""

from __future__ import annotations

import json

import pandas as pd
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir


def test_synthetic_sweep_is_marked_in_manifest_and_summary(tiny_model_dir, tiny_draft_dir, tmp_path):
    from specbench.cli.app import app

    args = ["sweep", "--target", str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir),
            "-c", "2", "-t", "0", "-k", "2", "--no-speedup", "--synthetic-acceptance", "1.0,1.0",
            "--data-dir", str(data_dir()), "--limit", "2", "--shots", "1", "--max-tokens", "9", "--warmup", "0",
            "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path), "--run-id", "syn", "--quiet"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "SYNTHETIC ACCEPTANCE 1.0,1.0 (forced: output not lossless)" in result.output
    manifest = json.loads((tmp_path / "syn" / "manifest.json").read_text())
    assert manifest["synthetic_acceptance"] == [1.0, 1.0]
    cells = pd.read_parquet(tmp_path / "syn" / "cells.parquet")
    # Rate 1.0 at both positions: every round accepts every draft.
    assert cells["acceptance_rate"].iloc[0] == 1.0
