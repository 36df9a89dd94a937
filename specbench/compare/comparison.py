"""compare_runs: every metric of every cell of two runs, with the delta, the interval that decides its verdict, the
verdict and the minimum detectable effect (noise.py says which noise each metric is judged against)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from specbench.compare.bootstrap import Estimate, Interval, percentile_interval, rng_for
from specbench.compare.cell_estimates import RunEstimates
from specbench.compare.load import ProbeDrift, probe_drift
from specbench.compare.loading import Run
from specbench.compare.matching import Matching, MatchKey, match_cells
from specbench.compare.metrics_catalog import Delta, Metric, Resampling, select
from specbench.compare.noise import Evidence, NoiseBasis, basis_of, bootstrap_evidence, run_evidence
from specbench.compare.paired import paired_compare
from specbench.compare.run_info import Difference, RunInfo, differences
from specbench.compare.verdict import Verdict, decide
from specbench.errors import SpecbenchError
from specbench.metrics.specs import over_repeats

# Metric groups that measure the engine's speed or drafting, meaningless where it emits wrong outputs
MEASURES_A_CORRECT_ENGINE = ("throughput", "latency", "goodput", "acceptance", "tree", "speedup")


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
    interval: Interval | None  # of delta: the one that decides the verdict (noise.py), None when nothing can
    p_value: float | None  # PAIRED metrics: exact sign test, for reference (the interval decides)
    verdict: Verdict
    num_before: int  # requests behind the before value (PAIRED: questions in both runs)
    num_after: int
    basis: NoiseBasis  # what the interval's noise is: runs (speed metrics), requests, or paired questions
    mde: float | None  # minimum detectable |delta| (delta units), at least min_change; None: no interval
    num_runs_before: int  # repeats of the cell
    num_runs_after: int
    run_spread: float | None = None  # RUNS basis: pooled between-repeat sd (log units; absolute deltas: stored units)
    bootstrap_interval: Interval | None = None  # RUNS basis: the request (and repeat) bootstrap; decides nothing
    control_delta: float | None = None  # RUNS basis: the k = 0 control cells' change between the runs (load)
    probe_sd: float | None = None  # RUNS basis: between-run sd from the drift probes (log units)


@dataclass(frozen=True)
class Divergence:
    """A greedy speculative cell whose outputs differ from k = 0 in one run or both (runs/greedy_divergence.py)."""

    key: MatchKey
    before: float | None  # exact-text agreement with k = 0 (mean over repeats); None: not measured on that side
    after: float | None

    @property
    def is_regression(self) -> bool:
        """The change broke outputs that were exact before (else both runs are broken, or the change fixed them)."""
        return self.after is not None and self.after < 1 and (self.before is None or self.before >= 1)


@dataclass(frozen=True)
class Comparison:
    before: RunInfo
    after: RunInfo
    matching: Matching
    differences: tuple[Difference, ...]
    metrics: tuple[Metric, ...]
    rows: tuple[MetricDelta, ...]  # grouped by cell key, catalog order within a cell
    options: CompareOptions
    divergences: tuple[Divergence, ...] = ()  # correctness first: shown before every table
    drift: ProbeDrift = ProbeDrift(None, None, None)  # the drift probes of both runs (compare/load.py)

    @property
    def critical_differences(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.is_critical)


def max_topk(cells: pd.DataFrame) -> int:
    """The widest tree of a run's cells: 1 where it drafted chains only (or its tables predate trees)."""
    return int(cells["eagle_topk"].max()) if "eagle_topk" in cells and len(cells) else 1


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
    metrics = select(options.metrics, num_positions, max(max_topk(before.cells), max_topk(after.cells)))
    sides = (RunEstimates(before, "before", options.num_resamples, options.seed),
             RunEstimates(after, "after", options.num_resamples, options.seed))
    drift = probe_drift(before.cells, after.cells)
    divergences = tuple(d for key in matching.all_keys if (d := Divergence(key, *(s.same_text(key) for s in sides)))
                        and any(v is not None and v < 1 for v in (d.before, d.after)))
    broken = {d.key for d in divergences}
    rows = []
    for key in matching.all_keys:
        for metric in metrics:
            if metric.needs_drafts and key.num_steps == 0:
                continue
            row = _compare_metric(metric, key, *sides, options, drift)
            if row.before is None and row.after is None:
                continue
            if key in broken and metric.group in MEASURES_A_CORRECT_ENGINE:
                row = replace(row, interval=None, verdict=Verdict.NOT_COMPARABLE, mde=None)
            rows.append(row)
    return Comparison(before.info, after.info, matching, diffs, metrics, tuple(rows), options, divergences, drift)


def _compare_metric(metric: Metric, key: MatchKey, before: RunEstimates, after: RunEstimates,
                    options: CompareOptions, drift: ProbeDrift) -> MetricDelta:
    runs = before.num_repeats(key), after.num_repeats(key)
    if metric.resampling is Resampling.PAIRED:
        return judge_paired(metric, key, before.outcomes(metric, key), after.outcomes(metric, key), runs, options)
    control = None
    if basis_of(metric) is NoiseBasis.RUNS and metric.resampling is not Resampling.SPEEDUP:
        # The k = 0 cells are the load's control (compare/load.py); a speedup is a ratio to them already.
        base = before.estimate(metric, key.baseline), after.estimate(metric, key.baseline)
        if all(e.point is not None for e in base):
            control = tuple(e.repeat_points for e in base)
    return judge_estimates(metric, key, before.estimate(metric, key), after.estimate(metric, key), options,
                           drift.variance, control)


def judge_paired(metric: Metric, key: MatchKey, before: tuple[float | None, pd.Series],
                 after: tuple[float | None, pd.Series], num_runs: tuple[int, int],
                 options: CompareOptions) -> MetricDelta:
    """before/after: (cell value, per-question mean outcome indexed by question)."""
    (value_before, outcomes_before), (value_after, outcomes_after) = before, after
    if value_before is None or value_after is None:
        return _one_sided(metric, key, value_before, value_after, num_runs)
    rng = rng_for(options.seed, "paired", key, metric.name)
    paired = paired_compare(outcomes_before, outcomes_after, options.num_resamples, rng)
    interval = percentile_interval(paired.replicates, options.confidence) if paired.num_pairs else None
    evidence = bootstrap_evidence(NoiseBasis.QUESTIONS, interval, paired.num_pairs, options.confidence)
    delta = value_after - value_before
    return _row(metric, key, value_before, value_after, delta, evidence, options, (paired.num_pairs,) * 2, num_runs,
                p_value=paired.p_value)


def judge_estimates(metric: Metric, key: MatchKey, before: Estimate, after: Estimate, options: CompareOptions,
                    probe_variance: float | None = None,
                    control: tuple[tuple[float, ...], tuple[float, ...]] | None = None) -> MetricDelta:
    """RUNS basis (speed metrics): t over the repeats' logs, with the drift probes' variance and the k = 0
    control (noise.py); the values are geometric means over repeats (metrics/specs.over_repeats), so the delta is
    their ratio. REQUESTS basis: the bootstrap replicates."""
    num_runs = before.num_repeats, after.num_repeats
    if before.point is None or after.point is None:
        return _one_sided(metric, key, before.point, after.point, num_runs)
    basis = basis_of(metric)
    if basis is NoiseBasis.RUNS and metric.delta is Delta.RELATIVE:
        points = over_repeats(before.repeat_points), over_repeats(after.repeat_points)
        if None not in points:
            before, after = replace(before, point=points[0]), replace(after, point=points[1])
    delta, replicates = _delta(metric, before, after)
    bootstrap = percentile_interval(replicates, options.confidence)
    if basis is NoiseBasis.RUNS:
        evidence = run_evidence(before.repeat_points, after.repeat_points, metric.delta, options.confidence,
                                probe_variance, control)
    elif delta is None and replicates is None and before.replicates is not None and after.replicates is not None:
        # From 0 (an acceptance that had collapsed): no ratio, so the difference's interval decides.
        evidence = bootstrap_evidence(basis, percentile_interval(after.replicates - before.replicates,
                                                                  options.confidence))
        # The difference's interval (stored units) is the one that decides: kept as the row's bootstrap interval.
        return _row(metric, key, before.point, after.point, None, evidence, options,
                    (before.num_requests, after.num_requests), num_runs, bootstrap=evidence.interval,
                    from_zero=after.point - before.point)
    else:
        evidence = bootstrap_evidence(basis, bootstrap)
    return _row(metric, key, before.point, after.point, delta, evidence, options,
                (before.num_requests, after.num_requests), num_runs,
                bootstrap=bootstrap if basis is NoiseBasis.RUNS else None)


def _row(metric: Metric, key: MatchKey, before: float, after: float, delta: float | None, evidence: Evidence,
         options: CompareOptions, num: tuple[int, int], num_runs: tuple[int, int], p_value: float | None = None,
         bootstrap: Interval | None = None, from_zero: float | None = None) -> MetricDelta:
    """`from_zero`: a relative metric that was 0 before: judged on its difference (stored units), shown "from 0"."""
    min_change = options.min_change / 100
    if delta is None and from_zero is None:  # before is 0 with nothing to resample: neither interval nor verdict
        evidence = Evidence(evidence.basis, None, None, evidence.spread)
    verdict = decide(delta if from_zero is None else from_zero, evidence, metric.higher_is_better,
                     0.0 if from_zero is not None else min_change)
    mde = None if evidence.mde is None or from_zero is not None else max(evidence.mde, min_change)
    return MetricDelta(key, metric, before, after, delta, None if from_zero is not None else evidence.interval,
                       p_value, verdict, *num, evidence.basis, mde, *num_runs, evidence.spread, bootstrap,
                       evidence.control_delta, evidence.probe_sd)


def _delta(metric: Metric, before: Estimate, after: Estimate) -> tuple[float | None, np.ndarray | None]:
    have = before.replicates is not None and after.replicates is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric.delta is Delta.ABSOLUTE:
            return after.point - before.point, after.replicates - before.replicates if have else None
        if before.point == 0:
            return None, None
        relative = after.replicates / before.replicates - 1 if have else None
        return after.point / before.point - 1, relative


def _one_sided(metric: Metric, key: MatchKey, before: float | None, after: float | None,
               num_runs: tuple[int, int]) -> MetricDelta:
    return MetricDelta(key, metric, before, after, None, None, None, Verdict.NOT_AVAILABLE, 0, 0, basis_of(metric),
                       None, *num_runs)
