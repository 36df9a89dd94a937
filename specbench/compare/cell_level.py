"""Acceptance of cells whose requests carry no per-request counts (HTTP, /metrics counter deltas): the cell values.

Such a source gives one value per cell repeat, so no request can be resampled: the estimate is the mean over
repeats, with replicates from resampling the repeats when there are >= 2 (else none: no interval, no verdict).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.compare.bootstrap import Estimate

MIN_CELL_REPEATS = 2  # cell-level values: an interval needs at least this many repeats


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
