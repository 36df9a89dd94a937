"""Issue 24: a launched server that dies mid-sweep ends the sweep with one error line naming the failed cell and the
resume command; the cells completed on the servers before it are kept."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.support.tiny_models import data_dir

STAND_IN = Path(__file__).with_name("stand_in_server.py")


@pytest.mark.slow  # two server launches: ~20 s on a loaded 2-core box
def test_a_server_dying_mid_sweep_keeps_the_completed_cells(tmp_path):
    from specbench.cli.app import app

    template = " ".join([shlex.quote(sys.executable), shlex.quote(str(STAND_IN)), "--port {port}",
                         "--num-steps {num_steps}", "--die-at-num-steps 3"])
    run_dir = tmp_path / "results" / "run"
    args = ["sweep", "--backend", "openai", "--server-cmd", template, "-k", "0,3", "--workload", "gsm8k", "--shots",
            "0", "--data-dir", str(data_dir()), "--max-tokens", "5", "--limit", "2", "-c", "1", "--warmup", "0",
            "--results-dir", str(tmp_path / "results"), "--run-id", "run", "--quiet"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})
    assert isinstance(result.exception, Exception) and not isinstance(result.exception, SystemExit), result.output
    message = str(result.exception)
    assert message.startswith("cell r0-t0-c1-k3 failed: the launched server (num-steps 3) exited with status 3 "
                              "during the cell (log "), message
    assert f"1 of 2 cells are complete in {run_dir}; then: specbench sweep --resume {run_dir}" in message, message
    assert "\n" not in message
    cells = pd.read_parquet(run_dir / "cells.parquet")
    assert list(cells["num_steps"]) == [0]
