"""Stage `accuracy`: GSM8K strict and flexible accuracy at k against the reference's, with their 95% intervals.

Rule (each filter): fail when drop = reference - now exceeds `accuracy_drop + z x sqrt(se_ref^2 + se_now^2)`
(z = 1.645: a one-sided 95% bound on the noise of two independent binomial means), se being the Wilson interval's
width / (2 x 1.96) (metrics/accuracy.interval_stderr): the sample stderr is 0 at an accuracy of 0 or 1, which would
call any drop from a perfect reference real and claim certainty at 0. Power: the smallest true drop found with 80%
probability is `accuracy_drop + (z + 0.84) x se`; no drop that large can happen when the reference is below it (an
accuracy cannot fall under 0), and the claim is then N/A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.gate.stage import ACCURACY, StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions, tolerance
from specbench.metrics.accuracy import Accuracy, format_accuracy, interval_stderr

Z_POWER = 0.8416  # standard normal quantile of 80% power


@dataclass(frozen=True)
class AccuracyOptions(StageOptions):
    accuracy_drop: float = tolerance(0.02, "accuracy: allowed drop (fraction) beyond 1.645 x the combined stderr",
                                     ok=lambda v: 0 <= v <= 1)
    # one-sided 95% normal quantile on the combined stderr (a constant of the rule, named in the report)
    accuracy_z: float = tolerance(1.645, None, cli=False)


class AccuracyStage:
    name = ACCURACY
    options = AccuracyOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        reference = None if inputs.reference is None else inputs.reference.accuracy
        return accuracy_stage(inputs.observation.accuracy, reference, inputs.options(AccuracyOptions))


def accuracy_stage(now: Accuracy | None, reference: Accuracy | None, tolerances: AccuracyOptions) -> StageResult:
    t = tolerances
    rule = (f"drop <= {t.accuracy_drop:.3f} + {t.accuracy_z:g} x combined stderr (strict and flexible; stderr from "
            "the 95% Wilson interval)")
    if reference is None:
        return StageResult(ACCURACY, Status.NOT_AVAILABLE, "-", rule, "-", "no reference accuracy (--reference)")
    if now is None or now.strict is None or reference.strict is None or min(now.n, reference.n) < 1:
        return StageResult(ACCURACY, Status.NOT_AVAILABLE, "-", rule, "-", "no scored GSM8K answers")
    failures, parts, powers, unreachable = [], [], [], []
    for name, ref, value in (("strict", reference.strict, now.strict),
                             ("flexible", reference.flexible, now.flexible)):
        if ref is None or value is None:
            continue
        se = math.sqrt(interval_stderr(ref, reference.n) ** 2 + interval_stderr(value, now.n) ** 2)
        bound = t.accuracy_drop + t.accuracy_z * se
        parts.append(f"{name} {format_accuracy(value, now.n)} (ref {format_accuracy(ref, reference.n)})")
        detectable = t.accuracy_drop + (t.accuracy_z + Z_POWER) * se
        powers.append(f"{name} {detectable:.3f}")
        if detectable > ref:
            unreachable.append(f"{name} ref {ref:.3f} < {detectable:.3f}")
        if ref - value > bound:
            failures.append(f"{name} dropped {ref - value:.3f} > {bound:.3f}")
    metric = "; ".join(parts) + f", n={now.n} (95% Wilson intervals)"
    power = ("detects a drop >= " + ", ".join(powers) + " at 80% power" if not unreachable else
             "N/A: no drop that large is possible (" + "; ".join(unreachable) + "): more prompts or a better "
             "reference accuracy")
    if failures:
        return StageResult(ACCURACY, Status.FAIL, metric, rule, power, "; ".join(failures))
    return StageResult(ACCURACY, Status.PASS, metric, rule, power, "within tolerance")
