"""The run directory on disk: per-cell parquet parts written atomically, consolidated tables after each cell."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from specbench.bench.records import Row
from specbench.bench.schema import TABLES, arrow_schema

MANIFEST = "manifest.json"
PARTS_DIR = "parts"
TMP_DIR = ".tmp"
# "cells" last: its part marks the cell complete.
PART_ORDER = ("requests", "steps", "categories", "cells")


def write_atomic(path: Path, write, run_dir: Path) -> None:
    """`write(tmp_path)` in run_dir/.tmp, then rename onto `path`: readers see the old file or the whole new one."""
    tmp_dir = run_dir / TMP_DIR
    tmp_dir.mkdir(exist_ok=True)
    tmp = tmp_dir / f"{path.parent.name}-{path.name}.{os.getpid()}.tmp"
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())  # the data is on disk before the name points at it (power loss, not just kill)
    os.replace(tmp, path)


def drop_staging(run_dir: Path) -> None:
    """Remove the staging directory once empty (it stays only when a write was interrupted)."""
    tmp_dir = run_dir / TMP_DIR
    if tmp_dir.is_dir() and not any(tmp_dir.iterdir()):
        tmp_dir.rmdir()


def write_json(path: Path, data: dict[str, Any], run_dir: Path) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2) + "\n"), run_dir)


def to_table(table: str, rows: Sequence[Row], num_positions: int) -> pa.Table:
    schema = arrow_schema(table, num_positions)
    for row in rows:
        if set(row) != set(schema.names):
            extra, missing = sorted(set(row) - set(schema.names)), sorted(set(schema.names) - set(row))
            raise ValueError(f"{table} row does not match the schema: extra {extra}, missing {missing}")
    return pa.Table.from_pylist(list(rows), schema=schema)


class RunStore:
    """Parts live in parts/<table>/<cell_id>.parquet; `<table>.parquet` holds every completed cell in grid order."""

    def __init__(self, run_dir: Path, cell_order: Sequence[str], num_positions: int) -> None:
        self.run_dir = Path(run_dir)
        self.cell_order = {cell_id: i for i, cell_id in enumerate(cell_order)}
        self.num_positions = num_positions
        self._tables: dict[str, dict[str, pa.Table]] = {name: {} for name in TABLES}

    def part_path(self, table: str, cell_id: str) -> Path:
        return self.run_dir / PARTS_DIR / table / f"{cell_id}.parquet"

    def open(self) -> None:
        """Create the layout (new run) or load the completed cells' parts and drop leftovers (resume)."""
        for table in TABLES:
            (self.run_dir / PARTS_DIR / table).mkdir(parents=True, exist_ok=True)
        for stale in (self.run_dir / TMP_DIR).glob("*.tmp") if (self.run_dir / TMP_DIR).is_dir() else ():
            stale.unlink()
        complete = {p.stem for p in (self.run_dir / PARTS_DIR / "cells").glob("*.parquet")}
        for table in TABLES:
            for path in (self.run_dir / PARTS_DIR / table).glob("*.parquet"):
                if path.stem in complete and path.stem in self.cell_order:
                    self._tables[table][path.stem] = pq.read_table(path)
                else:
                    path.unlink()  # a cell interrupted before its cells part: it runs again

    def completed(self) -> set[str]:
        return set(self._tables["cells"])

    def rows(self, table: str, cell_id: str) -> list[Row] | None:
        part = self._tables[table].get(cell_id)
        return None if part is None else part.to_pylist()

    def write_cell(self, cell_id: str, rows: dict[str, Sequence[Row]]) -> None:
        for table in PART_ORDER:
            part = to_table(table, rows[table], self.num_positions)
            write_atomic(self.part_path(table, cell_id), lambda tmp, part=part: pq.write_table(part, tmp), self.run_dir)
            self._tables[table][cell_id] = part
        self.consolidate()

    def close(self) -> None:
        drop_staging(self.run_dir)

    def consolidate(self) -> None:
        for table, parts in self._tables.items():
            ordered = [parts[c] for c in sorted(parts, key=self.cell_order.__getitem__)]
            merged = pa.concat_tables(ordered) if ordered else to_table(table, [], self.num_positions)
            path = self.run_dir / f"{table}.parquet"
            write_atomic(path, lambda tmp, merged=merged: pq.write_table(merged, tmp), self.run_dir)
