"""The summary's lines for the per-cell checks (bench/sweep_checks.py): the per-request acceptance histogram of
each speculative grid point, and warnings for loop-inflated acceptance and acceptance drift."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.bench.acceptance_drift import DRIFT_ALPHA, NUM_WINDOWS
from specbench.bench.drift import DRIFT_TOLERANCE
from specbench.bench.sweep_checks import LOOP_INFLATION_TOLERANCE
from specbench.metrics.loops import LOOP_MIN_COVERAGE, LOOP_MIN_REPEATS
from specbench.metrics.request_acceptance import NUM_HISTOGRAM_BINS, QUANTILES, sparkline
from specbench.runs.records import Row, is_null

MAX_NAMED = 4  # cells named per warning line


def histogram_lines(cells: Sequence[Row]) -> list[str]:
    """One line per (temperature, concurrency, k > 0) with a histogram: counts summed over repeats, quantiles
    averaged."""
    points: dict[tuple, list[Row]] = {}
    for row in cells:
        if row.get("acceptance_length_histogram") is not None and row["num_steps"]:
            temperature = "default" if math.isnan(row["temperature"]) else format(row["temperature"], "g")
            points.setdefault((temperature, row["concurrency"], row["num_steps"]), []).append(row)
    if not points:
        return []
    lines = [f"per-request acceptance length (1 + A_i / D_i; {NUM_HISTOGRAM_BINS} bins over [1, k + 1], requests "
             f"summed over repeats)"]
    for (temperature, concurrency, k), rows in points.items():
        counts = [sum(int(r["acceptance_length_histogram"][i]) for r in rows) for i in range(NUM_HISTOGRAM_BINS)]
        quantiles = []
        for q in QUANTILES:
            values = [r[f"acceptance_length_request_p{q}"] for r in rows
                      if not is_null(r.get(f"acceptance_length_request_p{q}"))]
            quantiles.append(f"p{q} {sum(values) / len(values):.2f}" if values else f"p{q} -")
        lines.append(f"  t={temperature} c={concurrency} k={k}: 1 |{sparkline(counts)}| {k + 1}  "
                     f"({sum(counts)} requests; {', '.join(quantiles)})")
    return lines


def loop_lines(cells: Sequence[Row]) -> list[str]:
    tested = [r for r in cells if r.get("is_acceptance_loop_inflated") is not None]
    inflated = [r for r in tested if r["is_acceptance_loop_inflated"] is True]
    num_loops = sum(int(r["num_loop_requests"]) for r in cells if not is_null(r.get("num_loop_requests")))
    rule = (f"a request loops when its last >= {LOOP_MIN_COVERAGE:.0%} is one block repeated >= {LOOP_MIN_REPEATS} "
            f"times; a cell is flagged when its acceptance length exceeds that of its non-looping requests by > "
            f"{LOOP_INFLATION_TOLERANCE:.0%}")
    if inflated:
        named = ", ".join(_inflated(r) for r in inflated[:MAX_NAMED])
        return [f"WARNING: acceptance inflated by degenerate output loops in {len(inflated)} of {len(tested)} cells "
                f"({rule}): a "
                f"benchmark artefact (random or unanswerable prompts), not what real traffic accepts ({named})"]
    if num_loops:
        return [f"note: {num_loops} requests ended in a degenerate loop, without inflating any cell's acceptance "
                f"beyond {LOOP_INFLATION_TOLERANCE:.0%} ({rule})"]
    return []


def _inflated(row: Row) -> str:
    clean = row["acceptance_length_without_loops"]
    without = f"{clean:.2f}" if not is_null(clean) else "- (all loop)"
    return (f"{row['cell_id']} AL {row['acceptance_length']:.2f} vs {without} without its "
            f"{row['num_loop_requests']} looping requests ({row['loop_request_fraction']:.0%})")


def drift_lines(cells: Sequence[Row]) -> list[str]:
    tested = [r for r in cells if r.get("is_acceptance_drift") is not None]
    drifting = [r for r in tested if r["is_acceptance_drift"] is True]
    rule = (f"Mann-Kendall p < {DRIFT_ALPHA:g} over {NUM_WINDOWS} time windows and a Theil-Sen change > "
            f"{DRIFT_TOLERANCE:.0%}")
    if drifting:
        named = ", ".join(_drift(r) for r in drifting[:MAX_NAMED])
        return [f"WARNING: acceptance drifts over time in {len(drifting)} of {len(tested)} --duration cells "
                f"({rule}): the server's speculation degrades (or improves) while it serves ({named})"]
    if tested:
        return [f"note: acceptance stable over time in all {len(tested)} tested --duration cells ({rule})"]
    return []


def _drift(row: Row) -> str:
    windows = [w for w in row["acceptance_windows"] if not is_null(w)]
    return (f"{row['cell_id']} {windows[0]:.2f} -> {windows[-1]:.2f} tokens/emission ({row['acceptance_drift']:+.0%}, "
            f"p={row['acceptance_drift_p']:.2g})")


PREFIX_CACHE_DROP = 0.10  # hit-rate points lost with speculation on that are flagged


def prefix_cache_lines(cells: Sequence[Row]) -> list[str]:
    """Per (temperature, concurrency): the k = 0 cells' prefix-cache hit rate against each k > 0's (means over
    repeats); a WARNING when speculation loses more than PREFIX_CACHE_DROP of it."""
    points: dict[tuple, dict[int, list[float]]] = {}
    for row in cells:
        rate = row.get("prefix_cache_hit_rate")
        if not is_null(rate):
            temperature = "default" if math.isnan(row["temperature"]) else format(row["temperature"], "g")
            points.setdefault((temperature, row["concurrency"]), {}).setdefault(row["num_steps"], []).append(rate)
    lines, drops = [], []
    for (temperature, concurrency), by_k in points.items():
        means = {k: sum(v) / len(v) for k, v in sorted(by_k.items())}
        lines.append(f"  t={temperature} c={concurrency}: " + ", ".join(f"k={k} {m:.0%}" for k, m in means.items()))
        if 0 in means:
            drops += [f"t={temperature} c={concurrency} k={k} {m:.0%} vs k=0 {means[0]:.0%}"
                      for k, m in means.items() if k and means[0] - m > PREFIX_CACHE_DROP]
    if not lines:
        return []
    sources = sorted({str(r["prefix_cache_source"]) for r in cells if not is_null(r.get("prefix_cache_hit_rate"))})
    head = [f"prefix-cache hit rate, speculation off (k=0) and on (the server's {', '.join(sources)})"]
    warn = [f"WARNING: speculation lowers the server's prefix-cache hit rate by > {PREFIX_CACHE_DROP:.0%} points: "
            + "; ".join(drops[:MAX_NAMED])] if drops else []
    return warn + head + lines


def check_lines(cells: Sequence[Row]) -> list[str]:
    return loop_lines(cells) + drift_lines(cells)
