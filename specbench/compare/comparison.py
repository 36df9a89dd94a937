"""compare_runs: every metric of every cell of two runs, with the delta, its interval and a verdict."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbench.compare.bootstrap import Estimate, Interval, percentile_interval, rng_for
from specbench.compare.cell_estimates import RunEstimates
from specbench.compare.loading import Run
from specbench.compare.matching import Matching, MatchKey, match_cells
from specbench.compare.metrics_catalog import Delta, Metric, Resampling, select
from specbench.compare.paired import paired_compare
from specbench.compare.run_info import Difference, RunInfo, differences
from specbench.compare.verdict import Verdict, decide
from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class CompareOptions:
    metrics: tuple[str, ...] | None = None  # names or groups (metrics_catalog.select); None = all
    num_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0
    min_change: float = 0.0  # smallest |delta| called a change: % for relative deltas, points for absolute ones
    strict: bool = False  # critical manifest differences are an error, not a warning


@dataclass(frozen=True)
class MetricDelta:
    key: MatchKey
    metric: Metric
    before: float | None  # stored units (seconds, fractions, tok/s)
    after: float | None
    delta: float | None  # RELATIVE: after / before - 1; ABSOLUTE: after - before (stored units)
    interval: Interval | None  # of delta
    p_value: float | None  # PAIRED metrics: exact sign test
    verdict: Verdict
    num_before: int  # requests behind the before value (PAIRED: questions in both runs)
    num_after: int


@dataclass(frozen=True)
class Comparison:
    before: RunInfo
    after: RunInfo
    matching: Matching
    differences: tuple[Difference, ...]
    metrics: tuple[Metric, ...]
    rows: tuple[MetricDelta, ...]  # grouped by cell key, catalog order within a cell
    options: CompareOptions

    @property
    def critical_differences(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.is_critical)


def compare_runs(before: Run, after: Run, options: CompareOptions | None = None) -> Comparison:
    options = options or CompareOptions()
    if not 0 < options.confidence < 1:
        raise SpecbenchError(f"--confidence must be between 0 and 1, got {options.confidence}")
    if options.num_resamples < 100:
        raise SpecbenchError(f"--resamples must be >= 100, got {options.num_resamples}")
    diffs = tuple(differences(before.info, after.info))
    critical = [d for d in diffs if d.is_critical]
    if options.strict and critical:
        listed = "; ".join(f"{d.field}: {d.before} vs {d.after}" for d in critical)
        raise SpecbenchError(f"--strict: the runs are not comparable ({listed})")
    matching = match_cells(before.cells, after.cells)
    num_positions = int(max(before.cells["num_steps"].max(), after.cells["num_steps"].max()))
    metrics = select(options.metrics, num_positions)
    sides = (RunEstimates(before, "before", options.num_resamples, options.seed),
             RunEstimates(after, "after", options.num_resamples, options.seed))
    rows = []
    for key in matching.all_keys:
        for metric in metrics:
            if metric.needs_drafts and key.num_steps == 0:
                continue
            row = _compare_metric(metric, key, *sides, options)
            if row.before is not None or row.after is not None:
                rows.append(row)
    return Comparison(before.info, after.info, matching, diffs, metrics, tuple(rows), options)


def _compare_metric(metric: Metric, key: MatchKey, before: RunEstimates, after: RunEstimates,
                    options: CompareOptions) -> MetricDelta:
    if metric.resampling is Resampling.PAIRED:
        value_before, outcomes_before = before.outcomes(metric, key)
        value_after, outcomes_after = after.outcomes(metric, key)
        if value_before is None or value_after is None:
            return _one_sided(metric, key, value_before, value_after)
        rng = rng_for(options.seed, "paired", key, metric.name)
        paired = paired_compare(outcomes_before, outcomes_after, options.num_resamples, rng)
        interval = percentile_interval(paired.replicates, options.confidence) if paired.num_pairs else None
        delta = value_after - value_before
        verdict = decide(delta, interval, paired.p_value, True, options.confidence, options.min_change / 100)
        return MetricDelta(key, metric, value_before, value_after, delta, interval, paired.p_value, verdict,
                           paired.num_pairs, paired.num_pairs)

    estimate_before, estimate_after = before.estimate(metric, key), after.estimate(metric, key)
    if estimate_before.point is None or estimate_after.point is None:
        return _one_sided(metric, key, estimate_before.point, estimate_after.point)
    delta, replicates = _delta(metric, estimate_before, estimate_after)
    interval = percentile_interval(replicates, options.confidence)
    verdict = decide(delta, interval, None, metric.higher_is_better, options.confidence, options.min_change / 100)
    return MetricDelta(key, metric, estimate_before.point, estimate_after.point, delta, interval, None, verdict,
                       estimate_before.num_requests, estimate_after.num_requests)


def _delta(metric: Metric, before: Estimate, after: Estimate) -> tuple[float | None, np.ndarray | None]:
    have = before.replicates is not None and after.replicates is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric.delta is Delta.ABSOLUTE:
            return after.point - before.point, after.replicates - before.replicates if have else None
        if before.point == 0:
            return None, None
        relative = after.replicates / before.replicates - 1 if have else None
        return after.point / before.point - 1, relative


def _one_sided(metric: Metric, key: MatchKey, before: float | None, after: float | None) -> MetricDelta:
    return MetricDelta(key, metric, before, after, None, None, None, Verdict.NOT_AVAILABLE, 0, 0)
