"""Where speculation stops paying: the concurrency above which a k's speedup over k = 0 falls below 1.

Per (workload, method, temperature, k > 0) and concurrency c: the speedup s_c is the geometric mean of the
repeats' speedups (cells.parquet `speedup`; metrics/specs.over_repeats, the one definition), and its interval
the Student t interval of the mean log speedup over the repeats, exponentiated (compare/noise.py's run-to-run
noise model: only repeats measure the noise of a speed ratio; with fewer than MIN_RUNS repeats, or no spread
between them, there is no interval).

The crossover c* is where log s crosses 0 going down, linear in log c between the last concurrency that pays
(s >= 1) and the first that does not: the first such crossing (the lowest concurrency where it stops paying).
Its interval: the same crossing of the upper and of the lower interval curves (a curve that stays >= 1 puts that
end above the largest measured concurrency, one that starts below 1 below the smallest). The band is pointwise,
so the interval is approximate (conservative where the concurrencies' noise is independent).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specbench.compare.noise import MIN_RUNS
from specbench.metrics.specs import over_repeats
from specbench.runs.cell_key import shape_text
from specbench.runs.records import Row, is_null

CONFIDENCE = 0.95


@dataclass(frozen=True)
class SpeedupPoint:
    concurrency: int
    speedup: float  # geometric mean over repeats
    low: float | None  # CONFIDENCE interval; None with < MIN_RUNS repeats or no spread
    high: float | None
    num_repeats: int


@dataclass(frozen=True)
class Crossover:
    workload: str
    method: str
    temperature: float  # NaN: the workload's per-sample default
    num_steps: int
    points: tuple[SpeedupPoint, ...]  # by concurrency
    concurrency: float | None  # c*; None when the speedup is >= 1 everywhere (or < 1 everywhere: see pays_nowhere)
    low: float | None  # interval of c*; -inf: below the smallest measured concurrency; +inf: above the largest
    high: float | None  # None: no interval (too few repeats at some concurrency)
    shape: str = ""  # the draft tree's shape after k in text (runs/cell_key.shape_text); "" for chains

    @property
    def pays_everywhere(self) -> bool:
        return all(p.speedup >= 1 for p in self.points)

    @property
    def pays_nowhere(self) -> bool:
        return all(p.speedup < 1 for p in self.points)


def speedup_point(concurrency: int, speedups: Sequence[float]) -> SpeedupPoint:
    logs = np.log(np.asarray(speedups, dtype=np.float64))
    mean = float(logs.mean())
    low = high = None
    if len(logs) >= MIN_RUNS and float(logs.std(ddof=1)) > 0:
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1)) * float(logs.std(ddof=1)) / math.sqrt(len(logs))
        low, high = math.exp(mean - half), math.exp(mean + half)
    return SpeedupPoint(concurrency, over_repeats(speedups), low, high, len(logs))


def first_crossing(concurrencies: Sequence[int], speedups: Sequence[float]) -> float:
    """c where log speedup first goes from >= 0 to < 0 (interpolated in log c); -inf if the first is < 1 already,
    +inf if none is."""
    if speedups[0] < 1:
        return -math.inf
    for (c0, s0), (c1, s1) in zip(zip(concurrencies, speedups), zip(concurrencies[1:], speedups[1:])):
        if s0 >= 1 > s1:
            g0, g1 = math.log(s0), math.log(s1)
            return math.exp(math.log(c0) + g0 / (g0 - g1) * (math.log(c1) - math.log(c0)))
    return math.inf


def crossovers(cells: Sequence[Row]) -> list[Crossover]:
    """One per (workload, method, temperature, k > 0) with speedups at >= 2 concurrencies."""
    groups: dict[tuple, dict[int, list[float]]] = {}
    for row in cells:
        speedup = row.get("speedup")
        if not row["num_steps"] or is_null(speedup) or not speedup > 0:
            continue
        temperature = float(row["temperature"])
        key = (row["workload"], row["method"], -1.0 if math.isnan(temperature) else temperature, row["num_steps"],
               shape_text(row))  # a tree cell is its own configuration, never pooled with the chain of its k
        groups.setdefault(key, {}).setdefault(int(row["concurrency"]), []).append(float(speedup))
    out = []
    for (workload, method, temperature, num_steps, shape), by_concurrency in sorted(groups.items()):
        if len(by_concurrency) < 2:
            continue
        points = tuple(speedup_point(c, by_concurrency[c]) for c in sorted(by_concurrency))
        cs = [p.concurrency for p in points]
        point = first_crossing(cs, [p.speedup for p in points])
        has_interval = all(p.low is not None for p in points)
        low = first_crossing(cs, [p.low for p in points]) if has_interval else None
        high = first_crossing(cs, [p.high for p in points]) if has_interval else None
        out.append(Crossover(workload, method, math.nan if temperature == -1.0 else temperature, int(num_steps),
                             points, point if math.isfinite(point) else None, low, high, shape))
    return out


def _end(value: float, points: Sequence[SpeedupPoint]) -> str:
    if value == -math.inf:
        return f"<{points[0].concurrency}"
    if value == math.inf:
        return f">{points[-1].concurrency}"
    return f"{value:.1f}"


def format_crossover(crossover: Crossover) -> str:
    temperature = "default" if math.isnan(crossover.temperature) else format(crossover.temperature, "g")
    where = f"{crossover.workload} {crossover.method} k={crossover.num_steps}{crossover.shape} t={temperature}"
    points = crossover.points
    measured = f"c={points[0].concurrency}..{points[-1].concurrency}"
    if crossover.pays_everywhere:
        lowest = min(points, key=lambda p: p.speedup)
        noisy = [str(p.concurrency) for p in points if p.low is not None and p.low < 1]
        return (f"{where}: speculation pays at every measured concurrency ({measured}; lowest "
                f"{lowest.speedup:.2f}x at c={lowest.concurrency})"
                + (f", within noise of 1 at c={','.join(noisy)}" if noisy else ""))
    if crossover.concurrency is None:
        return f"{where}: speculation never pays ({measured}: speedup < 1 at every concurrency)"
    interval = (f" [{CONFIDENCE:.0%} CI {_end(crossover.low, points)}, {_end(crossover.high, points)}]"
                if crossover.low is not None and crossover.high is not None else " (no interval: < 2 repeats)")
    return f"{where}: speculation stops paying above c≈{crossover.concurrency:.1f}{interval}"


def format_crossovers(cells: Sequence[Row]) -> str:
    rows = crossovers(cells)
    if not rows:
        return ""
    head = (f"where speculation stops paying (speedup vs k=0 crosses 1; geometric mean over repeats, "
            f"{CONFIDENCE:.0%} t-interval)")
    return "\n".join([head, *(f"  {format_crossover(c)}" for c in rows)])
