"""Stage `speed`: output throughput and median TPOT at k against the reference's, judged as `compare` judges speed:
the run-to-run t interval of the log ratio over the repeats (compare/noise.run_evidence) and compare's verdict
(compare/verdict.decide). Fails on a `regressed` verdict; with fewer than 2 repeats on a side there is no run-to-run
estimate, and the stage says N/A rather than pass or fail on noise."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.gate.observed import SpeedSamples
from specbench.gate.stage import SPEED, StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions, tolerance
from specbench.metrics.specs import over_repeats

METRICS = ("output_throughput", "tpot_median")


@dataclass(frozen=True)
class SpeedOptions(StageOptions):
    speed_min_change: float = tolerance(5.0, "speed: smallest change (%) called a regression", ok=lambda v: v >= 0)
    confidence: float = tolerance(0.95, None, ok=lambda v: 0 < v < 1, cli=False)  # of the run-to-run interval


class SpeedStage:
    name = SPEED
    options = SpeedOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        reference = None if inputs.reference is None else inputs.reference.speed
        return speed_stage(inputs.observation.speed, reference, inputs.options(SpeedOptions), inputs.num_steps)


def _values(samples: SpeedSamples, name: str) -> tuple[float, ...]:
    """The finite values: a repeat that measured nothing (NaN, as a reference file may hold) is no repeat, and
    counted as one it would let a single value through to a verdict that has no spread to judge by."""
    values = samples.output_throughput if name == "output_throughput" else samples.tpot_median_s
    return tuple(v for v in values if math.isfinite(v))


def speed_stage(now: SpeedSamples, reference: SpeedSamples | None, tolerances: SpeedOptions,
                num_steps: int) -> StageResult:
    # compare's estimators (scipy), imported when a stage is judged: the gate's command line reads this module's options
    from specbench.compare.metrics_catalog import select
    from specbench.compare.noise import MIN_RUNS, run_evidence
    from specbench.compare.verdict import Verdict, decide

    t = tolerances
    rule = (f"compare's verdict: regressed = {t.confidence:.0%} run-to-run interval excludes 0 and "
            f"|change| >= {t.speed_min_change:g}%")
    if reference is None:
        return StageResult(SPEED, Status.NOT_AVAILABLE, "-", rule, "-", "no reference speed (--reference)")
    parts, powers, regressed, unjudged = [], [], [], []
    for metric in select(METRICS, num_steps):
        before, after = _values(reference, metric.name), _values(now, metric.name)
        if min(len(before), len(after)) < MIN_RUNS:
            unjudged.append(metric.name)
            continue
        evidence = run_evidence(before, after, metric.delta, t.confidence)
        mean_b, mean_a = over_repeats(before), over_repeats(after)  # the interval is of their log ratio
        delta = mean_a / mean_b - 1 if mean_b and mean_a else None
        verdict = decide(delta, evidence, metric.higher_is_better, t.speed_min_change / 100)
        shown = f"{delta:+.1%}" if delta is not None else "n/a"
        parts.append(f"{metric.name} {shown} ({verdict.value})")
        if evidence.mde is not None:
            powers.append(f"{metric.name} ±{max(evidence.mde, t.speed_min_change / 100):.1%}")
        if verdict is Verdict.REGRESSED:
            regressed.append(f"{metric.name} regressed {shown}")
    if unjudged and not parts:
        return StageResult(SPEED, Status.NOT_AVAILABLE, f"repeats now {len(now.output_throughput)}, ref "
                           f"{len(reference.output_throughput)}", rule, "-",
                           f"speed needs >= {MIN_RUNS} repeats a side (--repeats): no verdict on noise")
    repeats = f"repeats now {len(now.output_throughput)}, ref {len(reference.output_throughput)}"
    metric_text = "; ".join([*parts, repeats])
    power = ("smallest change called: " + ", ".join(powers)) if powers else "no run-to-run spread"
    if regressed:
        return StageResult(SPEED, Status.FAIL, metric_text, rule, power, "; ".join(regressed))
    return StageResult(SPEED, Status.PASS, metric_text, rule, power, "no regression beyond run-to-run noise")
