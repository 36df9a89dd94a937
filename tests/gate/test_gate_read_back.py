"""The gate reads a run back whatever the stored values: an empty output with no reasoning text (stored null,
read by pandas 3 as NaN) is an `empty` output problem, not an AttributeError after the whole run."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq

from specbench.gate.observed import read_observation
from specbench.runs.tables import read_run_table
from tests.support.compare_fixtures import RunSpec, write_run


def _empty_first_output(run_dir):
    path = run_dir / "requests.parquet"
    table = pq.read_table(path)
    texts = table.column("output_text").to_pylist()
    texts[0] = ""
    index = table.schema.get_field_index("output_text")
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(texts, pa.string())), path)


def test_an_empty_output_without_reasoning_text_is_an_empty_problem(tmp_path):
    run_dir = write_run(tmp_path, "run", RunSpec("a", concurrencies=(1,), num_requests=4))
    _empty_first_output(run_dir)
    observation = read_observation(run_dir, 2)
    assert [p.kind for p in observation.problems] == ["empty"]


def test_missing_strings_read_back_as_none_and_numbers_keep_nan(tmp_path):
    run_dir = write_run(tmp_path, "run", RunSpec("a", concurrencies=(1,), num_requests=2))
    requests = read_run_table(run_dir, "requests")
    row = requests.to_dict("records")[0]
    assert row["reasoning_text"] is None and row["error"] is None and row["subcategory"] is None
    assert isinstance(row["output_text"], str)
    cells = read_run_table(run_dir, "cells")
    assert any(isinstance(v, float) and math.isnan(v) for v in cells.to_dict("records")[0].values())
