"""Acceptance over time within a cell, and the drift test for --duration runs.

bench/drift.py watches the machine (k = 0 throughput probes around each group of cells); this watches the
method: a server whose acceptance decays while it serves (a cache filling, a drafter state leaking) shows it only
over a long run. The measured window, from the first decode emission to the last emission of the cell, is cut
into NUM_WINDOWS equal time windows; a window's acceptance is its pooled tokens per decode emission (each
request's first emission, the prefill's token, left out). For the embedded engine a decode emission is one
verify round, so this is the acceptance length of the rounds that ended in the window; over HTTP it is what the
client saw per streamed event.

Test (k > 0 cells of --duration runs, where samples are cycled so the prompt mix does not change with time):
Mann-Kendall on the windows' values (S = sum_{i<j} sign(x_j - x_i), tie-corrected variance, continuity-
corrected two-sided normal p) and Theil-Sen's slope. `acceptance_drift` = Sen slope x (num windows - 1) / mean:
the relative change over the run. `is_acceptance_drift` when p < DRIFT_ALPHA and |acceptance_drift| >
DRIFT_TOLERANCE (bench/drift.py's noise band): a monotone trend, and one large enough to matter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from specbench.bench.drift import DRIFT_TOLERANCE

NUM_WINDOWS = 12
MIN_WINDOWS = 8  # windows with emissions needed for the test
DRIFT_ALPHA = 0.01


def acceptance_windows(rows: Sequence[Mapping[str, Any]], num_windows: int = NUM_WINDOWS) -> list[float | None]:
    """[num_windows] tokens per decode emission in each equal time window of the cell's decode span (None: no
    emission in it); [] without decode emissions. `rows`: the cell's successful request rows."""
    times, tokens = [], []
    for row in rows:
        times.extend(float(t) for t in list(row["emission_times"])[1:])
        tokens.extend(int(n) for n in list(row["tokens_per_emission"])[1:])
    if not times:
        return []
    t = np.asarray(times)
    start, span = t.min(), t.max() - t.min()
    index = np.zeros(len(t), dtype=np.int64) if span <= 0 else np.minimum(
        num_windows - 1, ((t - start) / span * num_windows).astype(np.int64))
    emissions = np.bincount(index, minlength=num_windows)
    sums = np.bincount(index, weights=np.asarray(tokens, dtype=np.float64), minlength=num_windows)
    return [float(s / e) if e else None for s, e in zip(sums, emissions, strict=True)]


def mann_kendall(values: Sequence[float]) -> tuple[float, float]:
    """(S, two-sided p) of the Mann-Kendall trend test; p = 1 when there is no variance (all tied)."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    s = float(sum(np.sign(x[j] - x[i]) for i in range(n) for j in range(i + 1, n)))
    ties = Counter(x.tolist()).values()
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18.0
    if var <= 0 or s == 0:
        return s, 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var)
    return s, float(2 * stats.norm.sf(abs(z)))


def sen_slope(values: Sequence[float]) -> float:
    """Median of the pairwise slopes (x_j - x_i) / (j - i), per window."""
    n = len(values)
    slopes = [(values[j] - values[i]) / (j - i) for i in range(n) for j in range(i + 1, n)]
    return float(np.median(slopes)) if slopes else 0.0


def drift_test_columns(windows: Sequence[float | None], is_tested: bool) -> dict[str, Any]:
    """acceptance_drift, acceptance_drift_p, is_acceptance_drift; null unless `is_tested` (k > 0 of a --duration
    run) and >= MIN_WINDOWS windows have emissions. Empty windows are dropped (their time order is kept)."""
    filled = [w for w in windows if w is not None]
    if not is_tested or len(filled) < MIN_WINDOWS:
        return {"acceptance_drift": None, "acceptance_drift_p": None, "is_acceptance_drift": None}
    _, p = mann_kendall(filled)
    mean = float(np.mean(filled))
    drift = sen_slope(filled) * (len(filled) - 1) / mean if mean > 0 else 0.0
    return {"acceptance_drift": drift, "acceptance_drift_p": p,
            "is_acceptance_drift": bool(p < DRIFT_ALPHA and abs(drift) > DRIFT_TOLERANCE)}
