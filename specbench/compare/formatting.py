"""How one comparison value, delta, interval and verdict read in a table cell."""

from __future__ import annotations

from specbench.compare.bootstrap import Interval
from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.metrics_catalog import Delta, Metric
from specbench.compare.noise import MIN_RUNS, NoiseBasis
from specbench.compare.verdict import Verdict

MISSING = "N/A"


def value_text(metric: Metric, value: float | None) -> str:
    return MISSING if value is None else f"{value * metric.scale:.{metric.digits}f}"


def signed_text(metric: Metric, value: float) -> str:
    if metric.delta is Delta.RELATIVE:
        return f"{100 * value:+.1f}%"
    return f"{value * metric.scale:+.1f}"


def delta_text(row: MetricDelta) -> str:
    if row.delta is None:
        if row.before is None or row.after is None:
            return MISSING
        return "from 0" if row.before == 0 and row.after != 0 else "-"
    text = signed_text(row.metric, row.delta)
    return text if row.metric.delta is Delta.RELATIVE else f"{text} pp"


def interval_text(metric: Metric, interval: Interval | None) -> str:
    if interval is None:
        return "-"
    body = f"[{signed_text(metric, interval.low)}, {signed_text(metric, interval.high)}]"
    return body if metric.delta is Delta.RELATIVE else f"{body} pp"


def verdict_text(row: MetricDelta, emphasis: bool = False) -> str:
    verdict = row.verdict
    if verdict is Verdict.REGRESSED:
        return "**REGRESSED**" if emphasis else "REGRESSED"
    if verdict is Verdict.IMPROVED:
        return "**improved**" if emphasis else "improved"
    if verdict is Verdict.NO_RUN_ESTIMATE:
        return "n/a (1 run)" if min(row.num_runs_before, row.num_runs_after) < MIN_RUNS else "n/a (no run spread)"
    if verdict is Verdict.NOT_COMPARABLE:
        return "not comparable" if not emphasis else "not comparable: outputs differ"
    return verdict.value


def mde_text(row: MetricDelta) -> str:
    """The minimum detectable effect, in the delta's units."""
    if row.mde is None:
        return "-"
    if row.metric.delta is Delta.RELATIVE:
        return f"±{100 * row.mde:.1f}%"
    return f"±{row.mde * row.metric.scale:.1f} pp"


def load_text(row: MetricDelta) -> str:
    """Speed rows: the load evidence beside the verdict: the k = 0 control cells' move and the drift probes."""
    parts = []
    if row.control_delta is not None:
        parts.append(f"k=0 {signed_text(row.metric, row.control_delta)}")
    if row.probe_sd is not None:
        parts.append(f"drift sd {100 * row.probe_sd:.0f}%")
    return ", ".join(parts) or "no load control"


def noise_text(row: MetricDelta) -> str:
    """What the verdict is judged against: runs (with their spread and the load evidence), requests, or paired
    questions."""
    if row.basis is NoiseBasis.RUNS:
        runs = f"{row.num_runs_before}+{row.num_runs_after} runs"
        if row.run_spread is None:
            return runs
        scale = 100 if row.metric.delta is Delta.RELATIVE else row.metric.scale
        unit = "%" if row.metric.delta is Delta.RELATIVE else " pp"
        return f"{runs} sd {row.run_spread * scale:.1f}{unit}; {load_text(row)}"
    if row.basis is NoiseBasis.QUESTIONS:
        return f"{row.num_before} q paired"
    return f"{row.num_before}+{row.num_after} req"


def run_text(info) -> str:
    text = info.label if info.label == info.run_id else f"{info.label} ({info.run_id})"
    return f"{text} {info.engine_note}" if info.engine_note else text


def statistics_note(comparison: Comparison) -> str:
    o = comparison.options
    level = f"{100 * o.confidence:g}%"
    threshold = f" and |delta| >= {o.min_change:g} (% or pp)" if o.min_change else ""
    return (
        "Correctness first: a greedy (temperature 0) speculative cell whose outputs differ from k=0 is a "
        "correctness regression; its speed and acceptance rows are 'not comparable'. "
        "Delta: after / before - 1 (accuracy, agreement, good requests: after - before, in percentage points). "
        f"The {level} CI printed is the one that decides the verdict: improved / REGRESSED exactly when it excludes "
        f"0{threshold}, by each metric's direction of goodness. Speed metrics (throughput, latency, goodput, "
        f"speedup) vary from run to run, so they are judged on runs: with >= {MIN_RUNS} repeats a side, a Student t "
        "interval of the log ratio of the geometric means over repeats (symmetric in log space, never past -100%), "
        "its variance the repeats' spread ('sd') plus the drift probes' ('drift sd'); a change the k=0 control "
        "cells made too is the load's ('k=0': their move between the runs) and is 'within drift', not a verdict: "
        "ratios inside one run (speedup, acceptance, tokens per emission) are the robust signal, and `specbench "
        "ab` alternates two engines in one invocation for a verdict on absolute speed. With one run a side (or no "
        "spread between repeats) there is no run-to-run estimate and no verdict ('n/a (1 run)'; the request "
        "bootstrap, blind to run-to-run noise, is in the CSV/JSON as ci_bootstrap_*). Speedup: the geometric mean "
        "of the per-repeat speedups. Acceptance: percentile bootstrap over the requests of all repeats pooled, "
        f"each a cluster of its draft rounds ({o.num_resamples} resamples, seed {o.seed}); from 0: judged on the "
        "difference. Accuracy and agreement: paired bootstrap over the questions both runs answered (exact sign "
        "test p in the CSV/JSON, for reference). MDE: the smallest |delta| the test could call with this noise. "
        f"n/a: a side is missing or has too few requests. About {100 * (1 - o.confidence):g}% of unchanged rows are "
        "flagged by chance: gate CI on a few metrics (--fail-on regressed:METRIC,...)."
    )


def console_note(comparison: Comparison) -> str:
    o = comparison.options
    return (
        f"Delta: after/before - 1 (accuracy, agreement: points). CI ({100 * o.confidence:g}%) decides the verdict. "
        f"Speed: t on log ratios over repeats (>= {MIN_RUNS} a side) plus drift; 'within drift': the k=0 control "
        "moved alike (load, not the change: use `specbench ab`). Acceptance: bootstrap over pooled requests "
        f"({o.num_resamples} resamples); accuracy/agreement: paired bootstrap over questions. --wide or --format "
        "md|csv|json for MDE, noise and load per row."
    )


def verdict_counts(comparison: Comparison) -> str:
    counts = {v: 0 for v in Verdict}
    for row in comparison.rows:
        counts[row.verdict] += 1
    return ", ".join(f"{n} {v.value}" for v, n in counts.items() if n) or "none"
