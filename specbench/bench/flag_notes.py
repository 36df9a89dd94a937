"""The summary's marks and warnings for speedups it cannot vouch for (bench/speedup_bound.py, bench/drift.py)."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.bench.drift import DRIFT_TOLERANCE
from specbench.bench.speedup_bound import SPEEDUP_BOUND_TOLERANCE
from specbench.runs.records import Row
from specbench.runs.speedup_flags import DRIFT_MARK, IMPLAUSIBLE_MARK
from specbench.runs.sweep_config import SweepConfig

MAX_NAMED = 4  # cells named per warning line


def num_flagged(cells: Sequence[Row]) -> int:
    """Speedups the summary marks (either flag)."""
    return sum(r.get("is_speedup_implausible") is True or r.get("is_drift_suspect") is True for r in cells)


def inconsistent_cells(cells: Sequence[Row]) -> list[Row]:
    """Cells whose metrics disagree with their recomputation from the raw records (metrics/recompute.py)."""
    return [r for r in cells if r.get("is_metrics_consistent") is False]


def flag_lines(cells: Sequence[Row], config: SweepConfig) -> list[str]:
    """WARNING lines for cells whose metrics fail their recomputation, flagged speedups (with the footnote of their
    marks), notes on the run order and drift."""
    lines = [f"WARNING: cell {r['cell_id']}: metrics disagree with their recomputation from the raw request records "
             f"(an accounting bug; do not trust this cell): {r['metrics_mismatch']}" for r in inconsistent_cells(cells)]
    speculative = [r for r in cells if r["num_steps"] and r.get("speedup") is not None]
    implausible = [r for r in speculative if r.get("is_speedup_implausible") is True]
    if implausible:
        named = ", ".join(f"{r['cell_id']} speedup {r['speedup']:.3f} > bound {r['speedup_bound']:.3f}"
                          for r in implausible[:MAX_NAMED])
        lines.append(
            f"WARNING: {len(implausible)} of {len(speculative)} speedups exceed what their acceptance allows "
            f"{IMPLAUSIBLE_MARK} (speedup <= acceptance length x (1 - drafting share of step time), "
            f"+{SPEEDUP_BOUND_TOLERANCE:.0%} tolerance): the k = 0 cell ran under other load, or a measurement is "
            f"broken; do not trust them ({named})")
    suspect = [r for r in speculative if r.get("is_drift_suspect") is True]
    if suspect:
        named = ", ".join(f"{r['cell_id']} speedup {r['speedup']:.3f} within drift {r['baseline_drift']:+.0%}"
                          for r in suspect[:MAX_NAMED])
        lines.append(
            f"WARNING: {len(suspect)} of {len(speculative)} speedups lie within the baseline drift measured around "
            f"their cells {DRIFT_MARK}: the machine's load changed enough to explain them; rerun on a quiet "
            f"machine ({named})")
    drifts = [r["baseline_drift"] for r in cells if r.get("baseline_drift") is not None]
    if drifts:
        worst = max(drifts, key=abs)
        loud = abs(worst) > DRIFT_TOLERANCE
        lines.append(
            f"{'WARNING' if loud else 'note'}: baseline drift (k = 0 probes before and after each group of cells) "
            f"up to {worst:+.0%}" + (f", beyond the {DRIFT_TOLERANCE:.0%} noise band" if loud else ""))
    if config.server_cmd is not None and len(config.grid_num_steps) > 1:
        lines.append("note: --server-cmd launches one server per k, so cells ran grouped by k, not interleaved, and "
                     "no drift was measured: a load change between the k groups moves the speedups unseen")
    return lines
