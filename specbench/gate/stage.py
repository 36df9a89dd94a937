"""A gate stage's outcome: status, the metric it measured, the tolerance it applied, its power, and why."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from specbench.errors import SpecbenchError


class Status(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"  # --skip named it
    NOT_AVAILABLE = "N/A"  # nothing to judge it on (no reference, one repeat, no draft counts): neither pass nor fail
    CRASH = "CRASH"  # judging it raised inside specbench (a bug): no verdict; the gate exits ExitStatus.CRASHED


LOSSLESS, LOGPROBS, ACCURACY, ACCEPTANCE, SPEED, OUTPUTS = (
    "lossless", "logprobs", "accuracy", "acceptance", "speed", "outputs")
STAGES = (LOSSLESS, LOGPROBS, ACCURACY, ACCEPTANCE, SPEED, OUTPUTS)  # run in this order


@dataclass(frozen=True)
class StageResult:
    name: str  # one of STAGES
    status: Status
    metric: str  # what was measured, e.g. "12/12 turns identical"
    tolerance: str  # the rule applied, e.g. "no divergent mismatch (near-tie margin 0.1 nats)"
    power: str  # what the stage can detect, e.g. "detects a drop >= 0.12 at 80% power"
    reason: str  # why it passed or failed, one line
    details: tuple[str, ...] = ()  # extra lines (mismatches, failed requests), shown under the table


def skipped(name: str) -> StageResult:
    return StageResult(name, Status.SKIP, "-", "-", "-", "--skip")


def parse_skip(text: str | None) -> frozenset[str]:
    """'speed,accuracy' -> the names; an unknown name fails listing the stages."""
    names = frozenset(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = sorted(names - set(STAGES))
    if unknown:
        raise SpecbenchError(f"--skip {', '.join(unknown)}: unknown stage; stages: {', '.join(STAGES)}")
    return names


def check_requested(only: str | None) -> tuple[str, ...]:
    """--stages: the stages to run (default all)."""
    if only is None:
        return STAGES
    names = tuple(n.strip() for n in only.split(",") if n.strip())
    for name in names:
        if name not in STAGES:
            raise SpecbenchError(f"--stages {name}: unknown stage; stages: {', '.join(STAGES)}")
    return tuple(s for s in STAGES if s in names)
