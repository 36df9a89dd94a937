"""Stage `accuracy`: GSM8K strict and flexible accuracy at k against the reference's, with their stderr.

Rule (each filter): fail when drop = reference - now exceeds `accuracy_drop + z x sqrt(se_ref^2 + se_now^2)`
(z = 1.645: a one-sided 95% bound on the noise of two independent binomial means). Power: the smallest true drop
found with 80% probability is `accuracy_drop + (z + 0.84) x se`.
"""

from __future__ import annotations

import math

from specbench.gate.stage import ACCURACY, StageResult, Status
from specbench.gate.tolerances import Tolerances
from specbench.metrics.accuracy import Accuracy

Z_POWER = 0.8416  # standard normal quantile of 80% power


def accuracy_stage(now: Accuracy | None, reference: Accuracy | None, tolerances: Tolerances) -> StageResult:
    t = tolerances
    rule = f"drop <= {t.accuracy_drop:.3f} + {t.accuracy_z:g} x combined stderr (strict and flexible)"
    if reference is None:
        return StageResult(ACCURACY, Status.NOT_AVAILABLE, "-", rule, "-", "no reference accuracy (--reference)")
    if now is None or now.strict is None or reference.strict is None:
        return StageResult(ACCURACY, Status.NOT_AVAILABLE, "-", rule, "-", "no scored GSM8K answers")
    failures, parts, powers = [], [], []
    for name, a, se_a, b, se_b in (("strict", reference.strict, reference.strict_stderr, now.strict,
                                    now.strict_stderr),
                                   ("flexible", reference.flexible, reference.flexible_stderr, now.flexible,
                                    now.flexible_stderr)):
        se = math.sqrt((se_a or 0.0) ** 2 + (se_b or 0.0) ** 2)
        bound = t.accuracy_drop + t.accuracy_z * se
        parts.append(f"{name} {b:.3f}±{se_b or 0:.3f} (ref {a:.3f}±{se_a or 0:.3f})")
        powers.append(f"{name} {t.accuracy_drop + (t.accuracy_z + Z_POWER) * se:.3f}")
        if a - b > bound:
            failures.append(f"{name} dropped {a - b:.3f} > {bound:.3f}")
    metric = "; ".join(parts) + f", n={now.n}"
    power = "detects a drop >= " + ", ".join(powers) + " at 80% power"
    if failures:
        return StageResult(ACCURACY, Status.FAIL, metric, rule, power, "; ".join(failures))
    return StageResult(ACCURACY, Status.PASS, metric, rule, power, "within tolerance")
