"""Stage `outputs`: every request of the gate's run (every cell, every repeat) succeeded, produced text, and ended
on stop or length. A crash, an empty completion or any other finish reason fails it, except an empty completion
that k = 0 gave for the same prompt too (this run's k = 0 cell, else the reference's greedy outputs): that is the
model's own answer (a small model stops at once on some prompts), not something speculation or the server broke;
it is listed under the table and does not fail the gate."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.gate.observed import NORMAL_FINISH, GreedyOutput, Observation, OutputProblem
from specbench.gate.stage import OUTPUTS, StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions

SHOW = 5


class OutputsStage:
    name = OUTPUTS
    options = StageOptions  # no tolerance: every request must succeed

    def judge(self, inputs: StageInputs) -> StageResult:
        baseline = inputs.observation.baseline_outputs
        if baseline is None and inputs.reference is not None:
            baseline = inputs.reference.greedy_outputs
        return outputs_stage(inputs.observation, baseline)


def outputs_stage(observation: Observation, baseline: Sequence[GreedyOutput] | None = None) -> StageResult:
    """`baseline`: k = 0 greedy outputs (this run's, or the reference file's) that excuse an empty output."""
    empty_at_k0 = {(o.sample_id, o.turn) for o in baseline or () if not o.text.strip()}
    excused = tuple(p for p in observation.problems if _is_models_own(p, empty_at_k0))
    problems = tuple(p for p in observation.problems if p not in excused)
    notes = tuple(f"{p.cell_id} sample {p.sample_id} turn {p.turn}: empty at k = 0 too (the model's own answer, "
                  f"not a failure): {p.detail}" for p in excused[:SHOW])
    n = observation.num_requests
    tolerance = f"0 failed, empty or abnormally ended requests (finish reason {' or '.join(NORMAL_FINISH)})"
    power = f"every request checked ({n})"
    if n == 0:
        return StageResult(OUTPUTS, Status.FAIL, "0 requests", tolerance, power, "the run produced no requests")
    if not problems:
        reason = "all ok" if not excused else f"all ok ({len(excused)} empty at k = 0 too: the model's own answer)"
        return StageResult(OUTPUTS, Status.PASS, f"{n}/{n} requests ok", tolerance, power, reason, notes)
    kinds: dict[str, int] = {}
    for p in problems:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    details = tuple(f"{p.cell_id} sample {p.sample_id} turn {p.turn}: {p.kind}: {p.detail}" for p in problems[:SHOW])
    return StageResult(OUTPUTS, Status.FAIL, f"{n - len(problems)}/{n} requests ok", tolerance, power, summary,
                       details + notes)


def _is_models_own(problem: OutputProblem, empty_at_k0: set[tuple[str, int]]) -> bool:
    return problem.kind == "empty" and (problem.sample_id, problem.turn) in empty_at_k0
