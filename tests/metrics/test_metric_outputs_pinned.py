"""Pins what the metric specs feed, for a fixed synthetic pair of runs: the cells and categories rows, the sweep
summary tables, the compare output (JSON and Markdown), the schema doc and the plots' axis labels. The golden files
were written by the code before metrics became one spec each (metrics/specs.py); a refactor must keep them.

Regenerate (only for an intended change): SPECBENCH_PIN_WRITE=1 pytest tests/metrics/test_metric_outputs_pinned.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest

from specbench.bench.summary_table import format_categories, format_summary
from specbench.compare.comparison import CompareOptions, compare_runs
from specbench.compare.export import render_json
from specbench.compare.loading import load_run
from specbench.compare.table import render_markdown
from specbench.runs.schema import schema_markdown
from tests.support.compare_fixtures import RunSpec, write_run

GOLDEN = Path(__file__).parent / "golden"
WRITE = os.environ.get("SPECBENCH_PIN_WRITE") == "1"


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if WRITE:
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed"


def _plain(value):
    """Exact text of a table value (repr keeps every bit of a float)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _rows(frame: pd.DataFrame) -> str:
    rows = [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]
    return json.dumps(rows, indent=1, sort_keys=True) + "\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pinned")
    common = {"num_steps": (0, 2), "repeats": 2, "num_requests": 12, "concurrencies": (1, 3),
              "goodput": "tpot:15"}
    before = load_run(write_run(root, "before", RunSpec("before", **common)))
    after = load_run(write_run(root, "after", RunSpec("after", speed=1.1, accept_prob=0.5, acceptance_seed=1,
                                                      answer_seed=1, timing_seed=1, **common)))
    return before, after


def test_cell_and_category_rows_are_pinned(runs):
    before, _ = runs
    _check("cells.json", _rows(before.cells))
    _check("categories.json", _rows(before.categories))


def test_summary_tables_are_pinned(runs):
    before, _ = runs
    cells = before.cells.to_dict("records")
    text = format_summary(cells, width=100) + "\n\n" + format_categories(before.categories.to_dict("records"), 100)
    _check("summary.txt", text + "\n")


def test_compare_output_is_pinned(runs):
    comparison = compare_runs(*runs, CompareOptions(num_resamples=200, seed=3))
    _check("compare.json", render_json(comparison))
    _check("compare.md", render_markdown(comparison))


def test_schema_doc_is_pinned():
    _check("schema.md", schema_markdown())


def test_plot_axis_labels_are_pinned(runs):
    from specbench.compare.plots import plot_runs

    labels = []
    for named in plot_runs(list(runs)):
        for ax in named.figure.axes:
            labels.append(f"{named.name}: {ax.get_xlabel()!r} / {ax.get_ylabel()!r} / {ax.get_title()!r}")
    _check("plot_labels.txt", "\n".join(labels) + "\n")
