"""Correctness before speed: greedy speculative decoding is lossless, so at temperature 0 a speculative cell must
emit exactly its k = 0 cell's text. One that does not measures a broken engine: its speed and acceptance are not
a result (a fault that corrupts outputs can raise both). The sweep's summary warns of such cells first and compare
shows them first; this is the one place that says which cells they are."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specbench.runs.records import is_null

AGREEMENT_COLUMN = "agreement_text"  # cells.parquet: fraction of requests with the k = 0 cell's exact text


def same_text(row: Mapping[str, Any]) -> float | None:
    """The cell's exact-text agreement with k = 0 where it must be 1 (k > 0 at temperature 0), else None."""
    temperature, value = row.get("temperature"), row.get(AGREEMENT_COLUMN)
    if not row.get("num_steps") or is_null(temperature) or float(temperature) != 0.0 or is_null(value):
        return None
    return float(value)


def diverges(row: Mapping[str, Any]) -> bool:
    """A greedy speculative cell whose outputs differ from k = 0 in some request."""
    value = same_text(row)
    return value is not None and value < 1.0
