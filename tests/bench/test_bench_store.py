"""RunStore: atomic parts, consolidated tables, leftovers of an interrupted cell dropped on reopen."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from specbench.bench.store import RunStore
from specbench.runs.schema import TABLES, columns

_VALUES = {pa.float64(): 1.5, pa.int64(): 7, pa.string(): "s", pa.bool_(): True}


def _row(table: str, cell_id: str, num_positions: int) -> dict:
    row = {}
    for name, dtype, _ in columns(table, num_positions):
        row[name] = [_VALUES[dtype.value_type]] if pa.types.is_list(dtype) else _VALUES[dtype]
    row["cell_id"] = cell_id
    return row


def _rows(cell_id: str, num_positions: int = 2) -> dict[str, list[dict]]:
    return {table: [_row(table, cell_id, num_positions)] * (2 if table == "requests" else 1) for table in TABLES}


def test_cells_are_written_in_grid_order_and_read_by_pandas(tmp_path):
    store = RunStore(tmp_path, ["a", "b", "c"], num_positions=2)
    store.open()
    store.write_cell("b", _rows("b"))
    store.write_cell("a", _rows("a"))
    assert store.completed() == {"a", "b"}
    cells = pd.read_parquet(tmp_path / "cells.parquet")
    assert list(cells["cell_id"]) == ["a", "b"]
    assert list(pd.read_parquet(tmp_path / "requests.parquet")["cell_id"]) == ["a", "a", "b", "b"]
    assert set(pd.read_parquet(tmp_path / "parts" / "cells")["cell_id"]) == {"a", "b"}
    assert "accept_rate_pos_2" in cells and "cond_accept_rate_pos_2" in cells
    store.close()
    assert not (tmp_path / ".tmp").exists()


def test_reopen_keeps_complete_cells_and_drops_interrupted_ones(tmp_path):
    store = RunStore(tmp_path, ["a", "b"], num_positions=2)
    store.open()
    store.write_cell("a", _rows("a"))
    # An interruption after b's requests part but before its cells part, and a staging file left behind.
    (tmp_path / "parts" / "requests" / "b.parquet").write_bytes((tmp_path / "parts" / "requests" / "a.parquet")
                                                                .read_bytes())
    (tmp_path / ".tmp" / "cells-b.parquet.1.tmp").write_bytes(b"half a file")
    reopened = RunStore(tmp_path, ["a", "b"], num_positions=2)
    reopened.open()
    assert reopened.completed() == {"a"}
    assert not (tmp_path / "parts" / "requests" / "b.parquet").exists()
    assert not list((tmp_path / ".tmp").iterdir())
    assert reopened.rows("requests", "a")[0]["cell_id"] == "a" and reopened.rows("requests", "b") is None


def test_rows_must_match_the_schema(tmp_path):
    store = RunStore(tmp_path, ["a"], num_positions=1)
    store.open()
    rows = _rows("a", num_positions=1)
    rows["cells"][0]["surprise"] = 1.0
    with pytest.raises(ValueError, match="extra \\['surprise'\\]"):
        store.write_cell("a", rows)
    assert not (tmp_path / "parts" / "cells" / "a.parquet").exists()
