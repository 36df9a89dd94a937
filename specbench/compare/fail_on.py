"""`--fail-on regressed[:metric,...]`: the rows that make a CI gate fail, and the exit status for them."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.formatting import delta_text, interval_text, value_text
from specbench.compare.metrics_catalog import select
from specbench.compare.verdict import Verdict
from specbench.errors import SpecbenchError

CONDITIONS = {"regressed": Verdict.REGRESSED}
EXIT_FAILED = 1  # user errors exit 2


@dataclass(frozen=True)
class FailOn:
    verdict: Verdict
    metrics: tuple[str, ...] | None  # names or groups; None = every metric

    def offending(self, comparison: Comparison) -> list[MetricDelta]:
        names = None if self.metrics is None else {m.name for m in select(self.metrics, _positions(comparison))}
        return [r for r in comparison.rows if r.verdict is self.verdict and (names is None or r.metric.name in names)]


def _positions(comparison: Comparison) -> int:
    return max((r.key.num_steps for r in comparison.rows), default=0)


def parse_fail_on(text: str) -> FailOn:
    """'regressed' or 'regressed:output_throughput,acceptance_length' (metric names or groups)."""
    condition, _, names = text.partition(":")
    if condition not in CONDITIONS:
        raise SpecbenchError(f"--fail-on {text!r}: condition must be one of {', '.join(CONDITIONS)}")
    metrics = tuple(n.strip() for n in names.split(",") if n.strip()) or None
    if metrics is not None:
        select(metrics, num_positions=64)  # validates the names now, before any work
    return FailOn(CONDITIONS[condition], metrics)


def failure_report(spec: str, rows: list[MetricDelta]) -> str:
    lines = [f"--fail-on {spec}: {len(rows)} row(s) regressed beyond noise (exit {EXIT_FAILED}):"]
    for r in rows:
        m = r.metric
        lines.append(
            f"  {r.key.describe()}  {m.title}: {value_text(m, r.before)} -> {value_text(m, r.after)}  "
            f"{delta_text(r)} {interval_text(m, r.interval)}" + (f" p={r.p_value:.3g}" if r.p_value is not None else "")
        )
    return "\n".join(lines)
