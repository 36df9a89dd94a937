"""`--fail-on regressed[:metric,...]`: the rows that make a CI gate fail, and the exit status for them."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.formatting import delta_text, interval_text, noise_text, value_text
from specbench.compare.metrics_catalog import select
from specbench.compare.noise import MIN_RUNS
from specbench.compare.verdict import Verdict
from specbench.errors import ExitStatus, SpecbenchError

CONDITIONS = {"regressed": Verdict.REGRESSED}
EXIT_FAILED = ExitStatus.FAILED  # user errors exit ExitStatus.USAGE


@dataclass(frozen=True)
class FailOn:
    verdict: Verdict
    metrics: tuple[str, ...] | None  # names or groups; None = every metric

    def _gated(self, comparison: Comparison) -> list[MetricDelta]:
        names = (None if self.metrics is None
                 else {m.name for m in select(self.metrics, _positions(comparison), _topk(comparison))})
        return [r for r in comparison.rows if names is None or r.metric.name in names]

    def offending(self, comparison: Comparison) -> list[MetricDelta]:
        return [r for r in self._gated(comparison) if r.verdict is self.verdict]

    def unjudged(self, comparison: Comparison) -> list[str]:
        """One note per gated speed metric that got no verdict for want of repeats: it does not fail the gate
        (nothing says it regressed beyond run-to-run noise), but the gate did not check it either."""
        cells: dict[str, list[MetricDelta]] = {}
        for r in self._gated(comparison):
            if r.verdict is Verdict.NO_RUN_ESTIMATE:
                cells.setdefault(r.metric.name, []).append(r)
        notes = []
        for name, rows in cells.items():
            single = [r for r in rows if min(r.num_runs_before, r.num_runs_after) < MIN_RUNS]
            why = "1 run per side" if single else "no spread between repeats"
            notes.append(f"note: --fail-on: {name}: no run-to-run estimate ({why}) in {len(rows)} cell(s), not "
                         f"checked; rerun the sweeps with --repeats >= {MIN_RUNS}")
        return notes


def _positions(comparison: Comparison) -> int:
    return max((r.key.num_steps for r in comparison.rows), default=0)


def _topk(comparison: Comparison) -> int:
    return max((r.key.eagle_topk for r in comparison.rows), default=1)


def parse_fail_on(text: str) -> FailOn:
    """'regressed' or 'regressed:output_throughput,acceptance_length' (metric names or groups)."""
    condition, _, names = text.partition(":")
    if condition not in CONDITIONS:
        raise SpecbenchError(f"--fail-on {text!r}: condition must be one of {', '.join(CONDITIONS)}")
    metrics = tuple(n.strip() for n in names.split(",") if n.strip()) or None
    if metrics is not None:
        select(metrics, num_positions=64, max_topk=64)  # validates the names now, before any work
    return FailOn(CONDITIONS[condition], metrics)


def failure_report(spec: str, rows: list[MetricDelta]) -> str:
    lines = [f"--fail-on {spec}: {len(rows)} row(s) regressed beyond noise (exit {EXIT_FAILED}):"]
    for r in rows:
        m = r.metric
        lines.append(
            f"  {r.key.describe()}  {m.title}: {value_text(m, r.before)} -> {value_text(m, r.after)}  "
            f"{delta_text(r)} {interval_text(m, r.interval)} ({noise_text(r)})"
        )
    return "\n".join(lines)
