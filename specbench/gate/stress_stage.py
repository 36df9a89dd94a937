"""Stage `stress` (opt-in: `--stages ...,stress`, it runs minutes more): the stress matrix (specbench/stress/) with
speculation on vs off over the conditions the gentle gate never creates; fails when a condition corrupts or nothing
is drafted anywhere, naming the smallest failing condition. A `--base-url` server has a fixed k and no
speculation-off twin here: N/A, with the command that stresses it (`specbench stress --baseline-url`)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.gate.stage import StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions, tolerance

STRESS = "stress"


@dataclass(frozen=True)
class StressOptions(StageOptions):
    stress_requests: int = tolerance(8, "stress: requests per condition (more where its concurrency needs more)",
                                     ok=lambda v: v >= 1)
    stress_conditions: str = tolerance("", "stress: comma list of conditions to run (default: the whole matrix; "
                                       "`specbench stress` lists them)")


class StressStage:
    name = STRESS
    options = StressOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        from specbench.stress.report import to_markdown
        from specbench.stress.stage import StressRequest, run_stress

        t = inputs.options(StressOptions)
        rule = "greedy output (embedded) or canaries (server) equal to speculation off in every condition"
        sweep = inputs.sweep
        if not sweep.is_embedded and sweep.server_cmd is None:
            return StageResult(STRESS, Status.NOT_AVAILABLE, "-", rule, "-", "a running server's k is fixed: "
                               "`specbench stress --base-url URL --baseline-url URL_WITHOUT_SPECULATION`")
        names = tuple(n.strip() for n in t.stress_conditions.split(",") if n.strip())
        report = run_stress(StressRequest(sweep, inputs.num_steps, num_requests=t.stress_requests,
                                          conditions=names, fault=inputs.fault, quiet=sweep.quiet))
        n = len(report.verdicts)
        metric = f"{n - len(report.failing)}/{n} conditions clean"
        power = f"{sum(v.num_requests for v in report.verdicts)} requests a side; {len(report.not_run)} not run"
        rows = tuple(line for line in to_markdown(report).splitlines() if line.startswith("- "))
        status = Status.FAIL if report.exit_code else Status.PASS
        return StageResult(STRESS, status, metric, rule, power, report.headline(), rows)
