"""The run directory on disk: per-cell parquet parts written atomically, consolidated tables after each cell."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from specbench.errors import SpecbenchError
from specbench.runs.records import Row
from specbench.runs.schema import TABLES, arrow_schema

MANIFEST = "manifest.json"
PARTS_DIR = "parts"
TMP_DIR = ".tmp"
# "cells" last: its part marks the cell complete.
PART_ORDER = ("requests", "steps", "categories", "cells")


class WriteFailed(SpecbenchError):
    """A result file could not be written (disk full, quota, permissions); what was written before is intact."""

    def __init__(self, path: Path, err: OSError) -> None:
        super().__init__(f"cannot write {path}: {err.strerror or err}")
        self.path = path


def write_atomic(path: Path, write, run_dir: Path) -> None:
    """`write(tmp_path)` in run_dir/.tmp, then rename onto `path`: readers see the old file or the whole new one.

    Any OSError (ENOSPC, EDQUOT, EACCES, ...) leaves `path` as it was and raises WriteFailed naming it.
    """
    tmp_dir = run_dir / TMP_DIR
    tmp = tmp_dir / f"{path.parent.name}-{path.name}.{os.getpid()}.tmp"
    try:
        tmp_dir.mkdir(exist_ok=True)
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())  # the data is on disk before the name points at it (power loss, not just kill)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)  # frees what the failed write took; the next attempt starts clean
        raise WriteFailed(path, err) from None


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
        self.step_offset = 0  # added to the engine's step indices: `step` stays global over resumed sessions

    def part_path(self, table: str, cell_id: str) -> Path:
        return self.run_dir / PARTS_DIR / table / f"{cell_id}.parquet"

    def open(self) -> None:
        """Create the layout (new run) or load the completed cells' parts and drop leftovers (resume).

        A cell whose parts cannot all be read (a corrupted or truncated file) counts as missing: a stderr note
        names the unreadable part, the cell's parts are removed and it runs again.
        """
        try:
            for table in TABLES:
                (self.run_dir / PARTS_DIR / table).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise WriteFailed(self.run_dir / PARTS_DIR, err) from None
        for stale in (self.run_dir / TMP_DIR).glob("*.tmp") if (self.run_dir / TMP_DIR).is_dir() else ():
            stale.unlink()
        complete = {p.stem for p in (self.run_dir / PARTS_DIR / "cells").glob("*.parquet")} & set(self.cell_order)
        for cell_id in sorted(complete, key=self.cell_order.__getitem__):
            parts = self._read_cell(cell_id)
            if parts is not None:
                for table, part in parts.items():
                    self._tables[table][cell_id] = part
        for table in TABLES:
            for path in (self.run_dir / PARTS_DIR / table).glob("*.parquet"):
                if path.stem not in self._tables["cells"]:
                    path.unlink()  # a cell interrupted before its cells part (or unreadable): it runs again
        steps = [part["step"] for part in self._tables["steps"].values() if part.num_rows]
        # Engine step indices restart with each session's engine: offset them past every stored step.
        self.step_offset = max(int(pc.max(s).as_py()) for s in steps) + 1 if steps else 0

    def _read_cell(self, cell_id: str) -> dict[str, pa.Table] | None:
        parts = {}
        for table in TABLES:
            path = self.part_path(table, cell_id)
            try:
                parts[table] = pq.read_table(path)
            except (OSError, pa.ArrowException) as err:  # ArrowInvalid: not parquet; OSError: missing/unreadable
                why = str(err).splitlines()[0] if str(err) else type(err).__name__
                print(f"note: {path} is unreadable ({why}); cell {cell_id} runs again", file=sys.stderr)
                return None
        return parts

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

    def update_cells(self, updates: dict[str, Row]) -> None:
        """Merge `updates[cell_id]` into completed cells' rows (columns known only once later cells ran)."""
        for cell_id, values in updates.items():
            part = to_table("cells", [{**row, **values} for row in self.rows("cells", cell_id)], self.num_positions)
            write_atomic(self.part_path("cells", cell_id), lambda tmp, part=part: pq.write_table(part, tmp),
                         self.run_dir)
            self._tables["cells"][cell_id] = part
        self.consolidate(("cells",))

    def close(self) -> None:
        drop_staging(self.run_dir)

    def consolidate(self, tables: Sequence[str] = tuple(TABLES)) -> None:
        for table in tables:
            parts = self._tables[table]
            ordered = [parts[c] for c in sorted(parts, key=self.cell_order.__getitem__)]
            merged = pa.concat_tables(ordered) if ordered else to_table(table, [], self.num_positions)
            path = self.run_dir / f"{table}.parquet"
            write_atomic(path, lambda tmp, merged=merged: pq.write_table(merged, tmp), self.run_dir)
