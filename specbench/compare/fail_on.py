"""`--fail-on regressed[:metric,...]`: the rows that make a CI gate fail, and the exit status for them."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.compare.comparison import Comparison, MetricDelta
from specbench.compare.formatting import delta_text, interval_text, load_text, noise_text, value_text
from specbench.compare.metrics_catalog import select
from specbench.compare.noise import MIN_RUNS
from specbench.compare.verdict import JUDGED, Verdict
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
        """One "not judged" line per gated metric that got no verdict in some cell: a gate that could not check
        a metric fails (exit EXIT_FAILED), never passes silently."""
        cells: dict[str, list[MetricDelta]] = {}
        for r in self._gated(comparison):
            if r.verdict not in JUDGED:
                cells.setdefault(r.metric.name, []).append(r)
        lines = []
        for name, rows in cells.items():
            lines.append(f"--fail-on: {name}: not judged in {len(rows)} cell(s): {_why(rows)}")
        return lines

    def drift_notes(self, comparison: Comparison) -> list[str]:
        """Gated speed rows beyond the repeats' noise that the k = 0 control cells moved alike: not a failure (two
        runs cannot tell that from a change of load), and said so."""
        notes = []
        for r in self._gated(comparison):
            if r.verdict is Verdict.WITHIN_DRIFT:
                notes.append(f"note: --fail-on: {r.key.describe()} {r.metric.name} {delta_text(r)} is within drift "
                             f"({load_text(r)}): not failed; for a verdict on this change run `specbench ab`, "
                             "which alternates both engines in one invocation")
        return notes

    def correctness(self, comparison: Comparison) -> list[str]:
        """Greedy cells whose outputs the change made differ from k = 0: a correctness regression fails any gate."""
        return [f"--fail-on: CORRECTNESS: {d.key.describe()}: greedy outputs differ from k=0 after the change "
                f"(same text {d.after:.3f})" for d in comparison.divergences if d.is_regression]


def _why(rows: list[MetricDelta]) -> str:
    verdicts = {r.verdict for r in rows}
    if Verdict.NOT_COMPARABLE in verdicts:
        return "outputs differ from k=0 (not comparable)"
    if Verdict.NO_RUN_ESTIMATE in verdicts:
        single = any(min(r.num_runs_before, r.num_runs_after) < MIN_RUNS for r in rows)
        why = "1 run per side" if single else "no spread between repeats"
        return f"no run-to-run estimate ({why}); rerun the sweeps with --repeats >= {MIN_RUNS} or use `specbench ab`"
    return "a side is missing or has no interval"


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
