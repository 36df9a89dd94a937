"""The metric specs are the one declaration each surface reads: the cells schema documents every spec's column
with the spec's own text, CellMetrics writes exactly the pooled specs' values, and compare's estimators reproduce
them on the identity draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.compare.draws import identity_draw
from specbench.compare.estimators import estimator_of
from specbench.compare.metrics_catalog import select
from specbench.compare.request_sample import RequestSample
from specbench.errors import SpecbenchError
from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.metric_spec import sentence_case
from specbench.metrics.request_metrics import RequestMetrics
from specbench.metrics.specs import (
    CELL_POOLED_METRICS,
    NAMED_METRICS,
    SUMMARY_ACCURACY_ROWS,
    SUMMARY_GOODPUT_ROWS,
    SUMMARY_ROWS,
    catalog,
)
from specbench.runs.cell_acceptance import cell_value
from specbench.runs.records import stats_from_row
from specbench.runs.schema import columns
from tests.support.compare_fixtures import RunSpec, _requests

NUM_POSITIONS = 3


def test_every_metric_has_a_documented_cells_column():
    docs = {name: doc for name, _, doc in columns("cells", NUM_POSITIONS)}
    for metric in catalog(NUM_POSITIONS):
        assert metric.column in docs, metric.name
        if metric.doc:
            assert docs[metric.column] == metric.doc, metric.name


def test_names_and_columns_are_unique_and_selectable():
    metrics = catalog(NUM_POSITIONS)
    assert len({m.name for m in metrics}) == len({m.column for m in metrics}) == len(metrics)
    assert catalog(NUM_POSITIONS) == metrics  # the per-position specs too compare equal across look-ups
    assert select([m.name for m in NAMED_METRICS], NUM_POSITIONS) == NAMED_METRICS
    with pytest.raises(SpecbenchError, match="supported: throughput"):
        select(["no_such_metric"], NUM_POSITIONS)


def test_summary_rows_name_known_metrics():
    known = set(catalog(NUM_POSITIONS))
    rows = SUMMARY_ROWS + SUMMARY_GOODPUT_ROWS + SUMMARY_ACCURACY_ROWS
    assert all(row.metric is None or row.metric in known for row in rows)
    assert [row.text for row in SUMMARY_ROWS[:3]] == [
        "Output throughput (tok/s)", "Request throughput (req/s)", "Mean TTFT (ms)"]
    assert sentence_case("Same Text as k=0") == "Same text as k=0"


def test_cell_values_and_identity_estimates_are_one_computation():
    spec = RunSpec("r", num_steps=(0, NUM_POSITIONS), num_requests=9)
    keys = {"run_id": "r", "cell_id": "c", "repeat": 0, "concurrency": 2, "temperature": 0.0,
            "num_steps": NUM_POSITIONS, "method": "draft", "workload": "gsm8k", "workload_version": "1",
            "label": "r"}
    rows = _requests(spec, keys, "c")
    cell = CellMetrics.of([RequestMetrics.from_stats(stats_from_row(r)) for r in rows])
    row = cell.to_row(NUM_POSITIONS)
    sample = RequestSample.of(pd.DataFrame(rows))
    draw = identity_draw(sample)
    pooled_columns = [m for m in catalog(NUM_POSITIONS) if m.pooled is not None and m.group != "goodput"]
    assert set(CELL_POOLED_METRICS) <= set(pooled_columns)
    for metric in pooled_columns:
        (estimate,) = estimator_of(metric)(sample, draw)
        if metric.group == "tree":  # chains: no tree, the tree metrics are N/A on both sides
            assert row[metric.column] is None and np.isnan(estimate), metric.name
            continue
        assert row[metric.column] is not None and not np.isnan(estimate), metric.name
        assert estimate == row[metric.column], metric.name  # bit for bit: the same computation


def _tree_rows(rows: list[dict]) -> list[dict]:
    """The fixture's requests as if each round had verified a top-2 tree (counts per tree_stats.py's rules: made up,
    different per request, so sums and ratios are not trivially equal)."""
    out = []
    for i, row in enumerate(rows):
        rounds = int(row["num_draft_rounds"])
        out.append({**row, "eagle_topk": 2, "tree_num_rounds": rounds, "tree_num_accepted":
                    int(row["num_accepted_tokens"]), "tree_num_nodes": rounds * (4 + i % 3),
                    "tree_offered_per_depth": [rounds, rounds - i % 2, 1 + i % 2],
                    "tree_accepted_per_depth": [rounds - i % 2, i % 2, i % 2],
                    "tree_offered_per_rank": [rounds + 1, rounds], "tree_accepted_per_rank": [rounds - 1, i % 2]})
    return out


def test_tree_metrics_are_one_computation_from_rows_to_cells_and_compare():
    spec = RunSpec("r", num_steps=(0, NUM_POSITIONS), num_requests=9)
    keys = {"run_id": "r", "cell_id": "c", "repeat": 0, "concurrency": 2, "temperature": 0.0,
            "num_steps": NUM_POSITIONS, "method": "eagle3", "workload": "gsm8k", "workload_version": "1",
            "label": "r"}
    rows = _tree_rows(_requests(spec, keys, "c"))
    cell = CellMetrics.of([RequestMetrics.from_stats(stats_from_row(r)) for r in rows])
    row = cell.to_row(NUM_POSITIONS)
    sample = RequestSample.of(pd.DataFrame(rows))
    draw = identity_draw(sample)
    trees = [m for m in catalog(NUM_POSITIONS, max_topk=2) if m.group == "tree"]
    assert [m.name for m in trees] == ["tree_size", "tree_accept_depth_1", "tree_accept_depth_2",
                                       "tree_accept_depth_3", "tree_accept_rank_0", "tree_accept_rank_1"]
    nodes = sum(r["tree_num_nodes"] for r in rows)
    assert row["tree_size"] == nodes / sum(r["tree_num_rounds"] for r in rows)
    depth_1 = sum(r["tree_accepted_per_depth"][0] for r in rows) / sum(r["tree_offered_per_depth"][0] for r in rows)
    assert row["tree_accept_rate_per_depth"][0] == depth_1
    for metric in trees:
        (estimate,) = estimator_of(metric)(sample, draw)
        assert estimate == cell_value(row, metric.column), metric.name  # through the list columns too
    assert select(["tree"], NUM_POSITIONS, max_topk=2) == tuple(trees)
