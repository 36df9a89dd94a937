"""A gate stage's outcome: status, the metric it measured, the tolerance it applied, its power, and why."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Status(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"  # --skip named it
    NOT_AVAILABLE = "N/A"  # nothing to judge it on (no reference, one repeat, no draft counts): neither pass nor fail
    CRASH = "CRASH"  # judging it raised inside specbench (a bug): no verdict; the gate exits ExitStatus.CRASHED


# The names of the stages other gate code reasons about (which collect inputs, which are comparable); a stage needs
# no constant here: its name is its class's (gate/stages.py lists them all).
LOSSLESS, LOGPROBS, ACCURACY, ACCEPTANCE, SPEED, OUTPUTS = (
    "lossless", "logprobs", "accuracy", "acceptance", "speed", "outputs")


@dataclass(frozen=True)
class StageResult:
    name: str  # one of gate/stages.py STAGES
    status: Status
    metric: str  # what was measured, e.g. "12/12 turns identical"
    tolerance: str  # the rule applied, e.g. "no divergent mismatch (near-tie margin 0.1 nats)"
    power: str  # what the stage can detect, e.g. "detects a drop >= 0.12 at 80% power"
    reason: str  # why it passed or failed, one line
    details: tuple[str, ...] = ()  # extra lines (mismatches, failed requests), shown under the table


def skipped(name: str) -> StageResult:
    return StageResult(name, Status.SKIP, "-", "-", "-", "--skip")
