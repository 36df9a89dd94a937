"""What two runs recorded about the machine's load, for judging speed across them (compare/noise.py).

Repeats inside one run share its load, so their spread understates how far two runs made at different times can
differ. Two records say more: the drift probes (bench/drift.py: the same short k = 0 batch before and after each
group of cells; log(1 + baseline_drift) is the load change over a group, a sample of exactly the kind of change
that separates two runs) and the k = 0 control cells (the engine without speculation, measured in both runs: for a
change to speculation, their move between the runs is the load's). Neither is a repeat of the other run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

GROUP = ["repeat", "temperature", "concurrency"]  # the cells one pair of drift probes brackets (bench/grid.py)


@dataclass(frozen=True)
class ProbeDrift:
    variance: float | None  # mean of log(1 + drift)^2 over the probed groups of both runs; None: none probed
    worst_before: float | None  # the largest |baseline_drift| of each run (a fraction), None where not probed
    worst_after: float | None


def _drifts(cells: pd.DataFrame) -> list[float]:
    if "baseline_drift" not in cells:
        return []
    probed = cells[cells["baseline_drift"].notna()]
    values = probed.drop_duplicates(GROUP)["baseline_drift"].astype(float)  # one value per group, on each cell
    return [v for v in values if math.isfinite(v) and v > -1]


def probe_drift(before: pd.DataFrame, after: pd.DataFrame) -> ProbeDrift:
    """Drift probes of both runs' cells tables as a between-run variance in log units (0 drift: 0)."""
    drifts_before, drifts_after = _drifts(before), _drifts(after)
    both = drifts_before + drifts_after
    variance = sum(math.log1p(d) ** 2 for d in both) / len(both) if both else None
    return ProbeDrift(variance, max(drifts_before, key=abs, default=None), max(drifts_after, key=abs, default=None))


def drift_text(drift: ProbeDrift) -> str:
    if drift.variance is None:
        return "no drift probes"
    sides = [f"{name} {worst:+.0%}" for name, worst in (("before", drift.worst_before), ("after", drift.worst_after))
             if worst is not None]
    return f"drift probes up to {', '.join(sides)}"
