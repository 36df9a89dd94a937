"""One small real sweep (tiny model, CPU, n-gram drafts): the per-cell checks' columns and summary lines appear,
and what they say agrees with the request rows they come from."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.metrics.loops import scan_loop
from tests.support.cli_run import main_exit
from tests.support.tiny_models import data_dir


@pytest.mark.slow  # several seconds on 2 cores: the fast suite stays under 5 minutes
def test_sweep_writes_the_check_columns_and_summary_lines(tiny_model_dir, tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    args = ["sweep", "--target", str(tiny_model_dir), "--method", "ngram", "-k", "0,2", "--concurrency", "1,2",
            "--repeats", "2", "--data-dir", str(data_dir()), "--limit", "2", "--shots", "1", "--max-tokens", "24",
            "--warmup", "0", "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(results),
            "--run-id", "run", "--duration", "0.5"]
    code, out, err = main_exit(args, monkeypatch, capsys)
    assert code == 0, err
    cells = pd.read_parquet(results / "run" / "cells.parquet")
    requests = pd.read_parquet(results / "run" / "requests.parquet")
    speculative = cells[cells["num_steps"] == 2]
    k0 = cells[cells["num_steps"] == 0]
    # Histogram: every successful request of a k > 0 cell with draft rounds is counted once.
    for _, cell in speculative.iterrows():
        rows = requests[(requests["cell_id"] == cell["cell_id"]) & requests["error"].isna()]
        assert int(np.sum(cell["acceptance_length_histogram"])) == int(rows["acceptance_length"].notna().sum())
        assert cell["num_loop_requests"] == int(rows["is_degenerate_loop"].sum())
        assert len(cell["acceptance_windows"]) == 12
        assert cell["acceptance_drift_p"] is None or 0 <= cell["acceptance_drift_p"] <= 1
    assert k0["acceptance_length_histogram"].isna().all() and k0["is_acceptance_drift"].isna().all()
    # Token ids are not stored: check the flags against their own definition.
    flagged = requests[requests["is_degenerate_loop"] == True]  # noqa: E712 (pandas mask)
    assert (flagged["loop_coverage"] >= 0.5).all()
    assert requests["loop_coverage"].between(0, 1).all()
    assert scan_loop([1, 2, 3] * 10).is_degenerate_loop  # the detector the rows came from
    # The embedded engine caches prefixes (emptied before each cell): its hit rate over the window, k = 0 and k
    assert cells["prefix_cache_hit_rate"].between(0, 1).all() and cells["prefix_cache_note"].isna().all()
    assert "prefix-cache hit rate, speculation off (k=0) and on" in out
    assert "per-request acceptance length (1 + A_i / D_i" in out
    assert "t=0 c=1 k=2: 1 |" in out
    assert "where speculation stops paying" in out
    assert "ngram k=2 t=0: speculation" in out
    assert "tested --duration cells (Mann-Kendall p < 0.01" in out  # a drift warning or the stable note
