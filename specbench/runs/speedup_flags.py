"""The marks a sweep puts on speedups it cannot vouch for (cells.parquet `is_speedup_implausible`,
`is_drift_suspect`), declared once for the summary table (bench/flag_notes.py) and the speedup heatmap."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.records import Row

IMPLAUSIBLE_MARK = "(!)"  # above what its acceptance allows
DRIFT_MARK = "(~)"  # within the baseline drift of its group
FLAG_COLUMNS = (("is_speedup_implausible", IMPLAUSIBLE_MARK), ("is_drift_suspect", DRIFT_MARK))


def speedup_mark(rows: Sequence[Row]) -> str:
    """The marks of a grid point (one row per repeat): flagged when any repeat is."""
    marks = [mark for column, mark in FLAG_COLUMNS if any(r.get(column) is True for r in rows)]
    return "".join(f" {mark}" for mark in marks)
