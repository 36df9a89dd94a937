"""Acceptance and speed mean something only for a run that computes what the baseline computes: when the lossless
stage failed (greedy outputs at k differ from k = 0), a higher acceptance or a faster run measures a broken engine
(a bonus token from the wrong row is "accepted" more and emits faster), so those stages say "not comparable" instead
of PASS or "improved". A run that did not speculate at all (gate/speculation_check.py) still fails on that."""

from __future__ import annotations

import dataclasses

from specbench.gate.speculation_check import OFF
from specbench.gate.stage import ACCEPTANCE, LOSSLESS, SPEED, StageResult, Status

NOT_COMPARABLE = "not comparable: outputs differ from k = 0 (lossless FAIL)"
DEPENDS_ON_LOSSLESS = (ACCEPTANCE, SPEED)
_JUDGED = (Status.PASS, Status.FAIL, Status.NOT_AVAILABLE)  # SKIP and CRASH say something else and stay


def unless_outputs_differ(stages: tuple[StageResult, ...]) -> tuple[StageResult, ...]:
    """`stages` with acceptance and speed turned N/A, their verdicts withheld, when lossless failed."""
    lossless = next((s for s in stages if s.name == LOSSLESS), None)
    if lossless is None or lossless.status is not Status.FAIL:
        return stages
    return tuple(_withheld(s) if s.name in DEPENDS_ON_LOSSLESS and s.status in _JUDGED
                 and OFF not in s.reason else s for s in stages)


def _withheld(stage: StageResult) -> StageResult:
    return dataclasses.replace(stage, status=Status.NOT_AVAILABLE, metric="withheld: outputs differ", power="-",
                               reason=NOT_COMPARABLE)
