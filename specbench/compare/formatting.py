"""How one comparison value, delta, interval and verdict read in a table cell."""

from __future__ import annotations

from specbench.compare.bootstrap import Interval
from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.metrics_catalog import Delta, Metric
from specbench.compare.verdict import Verdict

MISSING = "N/A"


def value_text(metric: Metric, value: float | None) -> str:
    return MISSING if value is None else f"{value * metric.scale:.{metric.digits}f}"


def _signed(metric: Metric, value: float) -> str:
    if metric.delta is Delta.RELATIVE:
        return f"{100 * value:+.1f}%"
    return f"{value * metric.scale:+.1f}"


def delta_text(row: MetricDelta) -> str:
    if row.delta is None:
        return MISSING if row.before is None or row.after is None else "-"
    text = _signed(row.metric, row.delta)
    return text if row.metric.delta is Delta.RELATIVE else f"{text} pp"


def interval_text(metric: Metric, interval: Interval | None) -> str:
    if interval is None:
        return "-"
    body = f"[{_signed(metric, interval.low)}, {_signed(metric, interval.high)}]"
    return body if metric.delta is Delta.RELATIVE else f"{body} pp"


def verdict_text(verdict: Verdict, emphasis: bool = False) -> str:
    if verdict is Verdict.REGRESSED:
        return "**REGRESSED**" if emphasis else "REGRESSED"
    if verdict is Verdict.IMPROVED:
        return "**improved**" if emphasis else "improved"
    return verdict.value


def run_text(info) -> str:
    text = info.label if info.label == info.run_id else f"{info.label} ({info.run_id})"
    return f"{text} {info.engine_note}" if info.engine_note else text


def statistics_note(comparison: Comparison) -> str:
    o = comparison.options
    level = f"{100 * o.confidence:g}%"
    threshold = f"; and |delta| >= {o.min_change:g} (% or pp)" if o.min_change else ""
    return (
        f"Delta: after / before - 1 (accuracy and agreement: after - before, in percentage points). "
        f"{level} CI: percentile bootstrap, {o.num_resamples} resamples, seed {o.seed}: requests resampled within "
        "each run (acceptance: requests as clusters of their draft rounds), then repeats when a run has several; "
        "throughput windows by replaying the cell's admission schedule. Accuracy and agreement: paired on the same "
        "questions, paired bootstrap "
        f"interval, verdict by the exact sign test (McNemar) at p < {1 - o.confidence:.2g}. "
        f"Verdict: improved / REGRESSED when the interval excludes 0{threshold}, by each metric's direction of "
        "goodness; n/a: a side is missing or has too few requests (< 5 per cell and < 3 repeats). About "
        f"{100 * (1 - o.confidence):g}% of unchanged rows are flagged by chance: gate CI on a few metrics "
        "(--fail-on regressed:METRIC,...) or use --repeats, --confidence, --min-change."
    )


def console_note(comparison: Comparison) -> str:
    o = comparison.options
    return (
        f"Delta: after/before - 1 (accuracy, agreement: points). CI: {100 * o.confidence:g}% percentile bootstrap "
        f"({o.num_resamples} resamples over requests and repeats; accuracy: paired, exact sign test). "
        "n/a: missing side or < 5 requests."
    )


def verdict_counts(comparison: Comparison) -> str:
    counts = {v: 0 for v in Verdict}
    for row in comparison.rows:
        counts[row.verdict] += 1
    return ", ".join(f"{n} {v.value}" for v, n in counts.items())
