"""`sweep --server-cmd` launching `specbench serve` per num-steps on a tiny model: the specbench adapter reads its
counters, k = 0 gives speedup and agreement, greedy texts agree with the baseline (the engine is lossless)."""

from __future__ import annotations

import shlex
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir

pytestmark = pytest.mark.slow  # two `specbench serve` processes start (torch import, model load)

SERVE = (f"{shlex.quote(sys.executable)} -m specbench serve --target {{model}} --host {{host}} --port {{port}} "
         "--device cpu")


def test_sweep_launches_specbench_serve_per_num_steps(tiny_model_dir, tiny_draft_dir, tmp_path):
    from specbench.cli.app import app

    args = ["sweep", "--backend", "openai", "--target", str(tiny_model_dir), "--draft", str(tiny_draft_dir),
            "--method", "draft", "-k", "0,2",
            "--server-cmd", SERVE + " --method {method} --draft {draft} -k {num_steps}",
            "--server-baseline-cmd", SERVE, "--workload", "gsm8k", "--shots", "0", "--data-dir", str(data_dir()),
            "--limit", "2", "--max-tokens", "8", "--warmup", "0", "--results-dir", str(tmp_path), "--run-id", "sb",
            "--quiet", "--server-ready-timeout", "300"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    cells = pd.read_parquet(tmp_path / "sb" / "cells.parquet").set_index("num_steps")
    spec = cells.loc[2]
    assert spec["acceptance_source"] == "server:specbench" and spec["num_draft_rounds"] > 0
    assert spec["agreement_text"] == 1.0 and spec["speedup"] > 0
    assert len(spec["server_accepted_per_pos"]) == 2
