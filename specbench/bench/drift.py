"""Baseline drift: short k = 0 probes before and after each group of cells, and the flag for a speedup it explains.

Cells of one (repeat, temperature, concurrency) run back to back, k = 0 first (bench/grid.py). A load change
during the group (another job, thermal throttling, a noisy neighbour) moves throughput between the baseline and
the speculative cells and so moves their speedups. Each group is bracketed by two identical probes: the same few
first turns at k = 0, at the group's temperature and concurrency, all at once (the load pattern is the cells'
business; the probes measure the machine). `baseline_drift` = end probe throughput / start probe throughput - 1.

A speedup s is drift-suspect when |baseline_drift| > DRIFT_TOLERANCE and |log s| <= |log(1 + baseline_drift)|:
drift alone, with no effect of the method, could have moved a speedup of 1 to s (or a real one to 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runs.cell_key import CellKey
from specbench.runs.records import Row
from specbench.runs.sweep_config import SweepConfig
from specbench.runs.turns import TurnPlanner, turn_settings
from specbench.workloads.base import Sample

if TYPE_CHECKING:
    from specbench.backends.base import BenchBackend

# Drift within this fraction is run-to-run noise of a short probe: nothing is flagged.
DRIFT_TOLERANCE = 0.10
NO_DRIFT: Row = {"baseline_drift": None, "is_drift_suspect": None}  # not measured (yet, or at all)


def is_probed(config: SweepConfig) -> bool:
    """Probes need k = 0 on demand: the embedded engine (a --server-cmd run has one server per k, grouped by k;
    a --base-url server has one fixed k)."""
    return config.is_embedded and 0 in config.grid_num_steps


def num_probe_requests(concurrency: int) -> int:
    """One batch filling the concurrency slots: the cells' batch shape, at about one request's latency."""
    return concurrency


def run_probe(
    backend: BenchBackend,
    planner: TurnPlanner,
    samples: Sequence[Sample],
    key: CellKey,
    config: SweepConfig,
    chat_template: bool,
    name: str,
) -> float | None:
    """Output throughput (tok/s) of the probe batch at k = 0 for `key`'s group; None if no request succeeded."""
    baseline = key.baseline
    backend.start_cell(baseline)
    settings = turn_settings(config, baseline, chat_template)
    turns = [planner.first_turn(samples[i % len(samples)], settings)
             for i in range(num_probe_requests(key.concurrency))]
    finished = backend.run_turns(turns, key.concurrency, id_prefix=f"drift-{name}/{key.cell_id}")
    metrics = CellMetrics.of([RequestMetrics.from_stats(item.output.stats) for item in finished if item.error is None])
    return metrics.output_throughput


def drift_fraction(start_throughput: float | None, end_throughput: float | None) -> float | None:
    if not start_throughput or end_throughput is None:
        return None
    return end_throughput / start_throughput - 1.0


def is_drift_suspect(speedup: float | None, drift: float | None) -> bool | None:
    """Null when either is unknown (or the speedup is not positive)."""
    if speedup is None or drift is None or not speedup > 0 or drift <= -1.0:
        return None
    if abs(drift) <= DRIFT_TOLERANCE:
        return False
    return abs(math.log(speedup)) <= abs(math.log1p(drift))


def drift_columns(cell: Row, drift: float | None) -> Row:
    """baseline_drift of the cell's group; is_drift_suspect for speculative cells only (k = 0 has speedup 1)."""
    suspect = None if cell["num_steps"] == 0 else is_drift_suspect(cell["speedup"], drift)
    return {"baseline_drift": drift, "is_drift_suspect": suspect}
