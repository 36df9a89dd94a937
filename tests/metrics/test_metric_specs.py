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
        assert row[metric.column] is not None and not np.isnan(estimate), metric.name
        assert estimate == row[metric.column], metric.name  # bit for bit: the same computation
