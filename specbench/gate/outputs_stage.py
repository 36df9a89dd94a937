"""Stage `outputs`: every request of the gate's run (every cell, every repeat) succeeded, produced text, and ended
on stop or length. A crash, an empty completion or any other finish reason fails it."""

from __future__ import annotations

from specbench.gate.observed import NORMAL_FINISH, Observation
from specbench.gate.stage import OUTPUTS, StageResult, Status

SHOW = 5


def outputs_stage(observation: Observation) -> StageResult:
    problems = observation.problems
    n = observation.num_requests
    tolerance = f"0 failed, empty or abnormally ended requests (finish reason {' or '.join(NORMAL_FINISH)})"
    power = f"every request checked ({n})"
    if n == 0:
        return StageResult(OUTPUTS, Status.FAIL, "0 requests", tolerance, power, "the run produced no requests")
    if not problems:
        return StageResult(OUTPUTS, Status.PASS, f"{n}/{n} requests ok", tolerance, power, "all ok")
    kinds: dict[str, int] = {}
    for p in problems:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    details = tuple(f"{p.cell_id} sample {p.sample_id} turn {p.turn}: {p.kind}: {p.detail}" for p in problems[:SHOW])
    return StageResult(OUTPUTS, Status.FAIL, f"{n - len(problems)}/{n} requests ok", tolerance, power, summary,
                       details)
