"""The best (num-steps k, draft tree shape) per (workload, method, temperature, concurrency) of a run, and whether it
beats the runner-up beyond noise: the bootstrap interval of best / runner-up (compare's resampling) excludes 1."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.bench.store import drop_staging, write_atomic
from specbench.compare.bootstrap import percentile_interval
from specbench.compare.cell_estimates import RunEstimates
from specbench.compare.loading import Run, load_run
from specbench.compare.matching import DEFAULT_TEMPERATURE, MatchKey
from specbench.compare.metrics_catalog import BASE_METRICS, OUTPUT_THROUGHPUT, Metric
from specbench.metrics.specs import over_repeats
from specbench.runs.schema import RECOMMENDATION_COLUMNS

RECOMMENDATIONS = "recommendations.parquet"
CONFIDENCE = 0.95
NUM_RESAMPLES = 1000
OPTIMIZE_METRICS = {"throughput": OUTPUT_THROUGHPUT, "tpot": next(m for m in BASE_METRICS if m.name == "tpot_median")}


@dataclass(frozen=True)
class Recommendation:
    run_id: str
    workload: str
    method: str
    temperature: float  # NaN: the workload's per-sample default
    concurrency: int
    optimize: str
    metric: str
    num_candidates: int
    best_num_steps: int
    best_eagle_topk: int
    best_draft_token_budget: int | None
    best_value: float
    runner_up_num_steps: int
    runner_up_eagle_topk: int
    runner_up_draft_token_budget: int | None
    runner_up_value: float
    ratio: float  # best_value / runner_up_value
    ratio_low: float | None
    ratio_high: float | None
    is_distinguishable: bool | None  # None: too few requests for an interval


def recommend(run: Run, optimize: str = "throughput", seed: int = 0) -> list[Recommendation]:
    """One row per grid point measured with >= 2 (num-steps, tree shape) candidates (grid order)."""
    metric = OPTIMIZE_METRICS[optimize]
    estimates = RunEstimates(run, "run", NUM_RESAMPLES, seed)
    groups: dict[tuple, list[MatchKey]] = {}
    for key in estimates.cells:
        groups.setdefault((key.workload, key.method, key.temperature, key.concurrency), []).append(key)
    out = []
    for point, keys in sorted(groups.items()):
        ranked = _ranked(metric, estimates, keys)
        if len(ranked) >= 2:
            out.append(_recommendation(run.info.run_id, point, optimize, metric, ranked))
    return out


def _ranked(metric: Metric, estimates: RunEstimates, keys: list[MatchKey]) -> list:
    values = [(key, estimates.estimate(metric, key)) for key in keys]
    values = [(key, est) for key, est in values if est.point is not None and math.isfinite(est.point)]
    return sorted(values, key=lambda item: item[1].point, reverse=metric.higher_is_better)


def _recommendation(run_id: str, point: tuple, optimize: str, metric: Metric, ranked: list) -> Recommendation:
    (best_key, best), (runner_key, runner) = ranked[0], ranked[1]
    interval = None
    if best.replicates is not None and runner.replicates is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            interval = percentile_interval(best.replicates / runner.replicates, CONFIDENCE)
    workload, method, temperature, concurrency = point
    return Recommendation(
        run_id=run_id,
        workload=workload,
        method=method,
        temperature=math.nan if temperature == DEFAULT_TEMPERATURE else temperature,
        concurrency=concurrency,
        optimize=optimize,
        metric=metric.name,
        num_candidates=len(ranked),
        best_num_steps=best_key.num_steps,
        best_eagle_topk=best_key.eagle_topk,
        best_draft_token_budget=best_key.draft_token_budget or None,
        best_value=best.point,
        runner_up_num_steps=runner_key.num_steps,
        runner_up_eagle_topk=runner_key.eagle_topk,
        runner_up_draft_token_budget=runner_key.draft_token_budget or None,
        runner_up_value=runner.point,
        ratio=_ratio(best, runner),
        ratio_low=interval.low if interval else None,
        ratio_high=interval.high if interval else None,
        is_distinguishable=(interval.low > 1 or interval.high < 1) if interval else None,
    )


def _ratio(best, runner) -> float:
    """The ratio of the two candidates' geometric means over repeats (metrics/specs.over_repeats): against k = 0,
    the speedup the summary table prints."""
    high, low = over_repeats(best.repeat_points), over_repeats(runner.repeat_points)
    return high / low if high is not None and low else math.nan


def write_recommendations(run_dir: Path, optimize: str) -> list[Recommendation]:
    """Compute from the run directory's tables and write recommendations.parquet (nothing when no grid point
    has several num-steps values)."""
    rows = recommend(load_run(run_dir), optimize)
    if rows:
        schema = pa.schema([pa.field(name, dtype) for name, dtype, _ in RECOMMENDATION_COLUMNS])
        table = pa.Table.from_pylist([asdict(r) for r in rows], schema=schema)
        write_atomic(Path(run_dir) / RECOMMENDATIONS, lambda tmp: pq.write_table(table, tmp), Path(run_dir))
        drop_staging(Path(run_dir))
    return rows


def format_recommendations(rows: list[Recommendation]) -> str:
    if not rows:
        return ""
    optimize = rows[0].optimize
    goal = "highest output throughput" if optimize == "throughput" else "lowest median TPOT"
    lines = [f"best num-steps per grid point ({goal}; vs runner-up: ratio and {CONFIDENCE:.0%} bootstrap interval)"]
    for r in rows:
        temperature = "default" if math.isnan(r.temperature) else format(r.temperature, "g")
        where = f"{r.workload} {r.method} t={temperature} c={r.concurrency}"
        if r.is_distinguishable is None:
            verdict = "too few requests for an interval"
        else:
            verdict = ("beyond noise" if r.is_distinguishable else "within noise")
            verdict = f"[{r.ratio_low:.3f}, {r.ratio_high:.3f}] {verdict}"
        best = _point_text(r.best_num_steps, r.best_eagle_topk, r.best_draft_token_budget)
        runner_up = _point_text(r.runner_up_num_steps, r.runner_up_eagle_topk, r.runner_up_draft_token_budget)
        lines.append(f"  {where}: {best} (runner-up {runner_up}, ratio {r.ratio:.3f} {verdict})")
    return "\n".join(lines)


def _point_text(num_steps: int, eagle_topk: int, budget: int | None) -> str:
    """'k=3' for a chain, 'k=3 top-4' or 'k=3 top-4/16' for a tree."""
    if eagle_topk == 1:
        return f"k={num_steps}"
    return f"k={num_steps} top-{eagle_topk}" + ("" if budget is None else f"/{budget}")
