"""Acceptance of cells whose requests carry no per-request counts (HTTP, /metrics counter deltas): the cell values.

Such a source gives one value per cell repeat, so no request can be resampled: the estimate is the mean over
repeats, with replicates from resampling the repeats when there are >= 2 (else none: no interval, no verdict).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from specbench.compare.bootstrap import Estimate
from specbench.runs.records import is_null

MIN_CELL_REPEATS = 2  # cell-level values: an interval needs at least this many repeats


def cell_value(cell: Mapping[str, Any], column: str) -> float:
    """The cell's value of an acceptance column; per-position rates past the run's columns (a drafting server
    relabelled with its own k) are read from `server_accepted_per_pos`. NaN when undefined."""
    value = cell.get(column)
    if not is_null(value):
        return float(value)
    if column.startswith("accept_rate_pos_"):
        per_pos, rounds = cell.get("server_accepted_per_pos"), cell.get("num_draft_rounds")
        position = int(column.removeprefix("accept_rate_pos_"))
        if per_pos is not None and len(per_pos) >= position and not is_null(rounds) and rounds > 0:
            return float(per_pos[position - 1]) / float(rounds)
    return math.nan


def cell_level_estimate(values: Sequence[float], num_requests: int, num_resamples: int,
                        rng: np.random.Generator) -> Estimate:
    """`values`: [num_repeats] per-repeat cell values (NaN where undefined)."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=np.float64)
    if finite.size == 0:
        return Estimate(None, None, num_requests, len(values))
    if finite.size < MIN_CELL_REPEATS:
        return Estimate(float(finite.mean()), None, num_requests, len(values))
    which = rng.integers(finite.size, size=(num_resamples, finite.size))
    return Estimate(float(finite.mean()), finite[which].mean(axis=1), num_requests, len(values))
