"""Compare with acceptance known only per cell (HTTP /metrics deltas: requests without draft counts), and the
rule that a k=0 cell that drafted is no baseline."""

from __future__ import annotations

import pandas as pd
import pytest

from specbench.compare import CompareOptions, compare_runs, load_run
from tests.support.compare_fixtures import RunSpec, write_run

DRAFT_COLUMNS = ("num_draft_rounds", "num_draft_tokens", "num_accepted_tokens", "num_drafted_per_pos",
                 "num_accepted_per_pos", "accepted_per_round")


def _strip_request_counts(run_dir):
    """What an HTTP run against a server without per-request counts looks like: cell columns kept."""
    path = run_dir / "requests.parquet"
    requests = pd.read_parquet(path)
    for column in DRAFT_COLUMNS:
        requests[column] = None
    requests.to_parquet(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cell_level")
    common = dict(concurrencies=(1,), num_requests=12, output_len=12)
    before = write_run(root, "before", RunSpec("before", repeats=3, accept_prob=0.5, **common))
    after = write_run(root, "after", RunSpec("after", repeats=3, accept_prob=0.8, acceptance_seed=1, **common))
    single = write_run(root, "single", RunSpec("single", repeats=1, accept_prob=0.8, **common))
    for run_dir in (after, single):
        _strip_request_counts(run_dir)
    return root


def _row(comparison, name):
    return next(r for r in comparison.rows if r.metric.name == name and r.key.num_steps == 2)


def test_cell_level_acceptance_gets_an_interval_across_repeats_only(runs):
    before, after, single = (load_run(runs / name) for name in ("before", "after", "single"))
    options = CompareOptions(metrics=("acceptance_length", "acceptance_rate", "accept_pos"), num_resamples=200)
    three = compare_runs(before, after, options)
    for name in ("acceptance_length", "acceptance_rate", "accept_pos_1", "accept_pos_2"):
        row = _row(three, name)
        cells = after.cells[after.cells["num_steps"] == 2]
        column = {"accept_pos_1": "accept_rate_pos_1", "accept_pos_2": "accept_rate_pos_2"}.get(name, name)
        assert row.after == pytest.approx(cells[column].mean()) and row.before is not None, name
        assert row.interval is not None and row.interval.low <= row.delta <= row.interval.high, name
    one = _row(compare_runs(before, single, options), "acceptance_length")
    assert one.after is not None and one.delta is not None and one.interval is None  # one repeat: no interval


def test_a_k0_cell_that_drafted_is_no_baseline(runs, tmp_path):
    before = load_run(runs / "before")
    cells = before.cells.copy()
    is_k0 = cells["num_steps"] == 0
    cells.loc[is_k0, "num_draft_tokens"] = 30  # as if the k=0 server had drafted
    drafted = type(before)(before.path, before.info, before.manifest, cells, before.requests, before.categories)
    options = CompareOptions(metrics=("speedup", "agreement"), num_resamples=200)
    clean = compare_runs(before, before, options)
    assert any(r.metric.name == "speedup" and r.before is not None for r in clean.rows)
    assert not any(r.metric.name in ("speedup", "agreement_text") and r.before is not None
                   for r in compare_runs(drafted, drafted, options).rows)
