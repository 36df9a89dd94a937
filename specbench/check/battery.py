"""Run the check battery for one setup (a notebook calls `run_checks`; the CLI prints its table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from specbench.check.baseline import BASELINE_ALPHA, AcceptanceBaseline, check_baseline
from specbench.check.budget import BUDGETS, Budget
from specbench.check.crash import run_guarded
from specbench.check.greedy import check_greedy
from specbench.check.greedy_constrained import check_greedy_constrained
from specbench.check.invariant_sweep import check_invariants
from specbench.check.metrics_check import check_metrics
from specbench.check.names import CHECKS
from specbench.check.oracle import check_oracle
from specbench.check.reference import ReferenceCrossCheck
from specbench.check.path_log import PathLog
from specbench.check.result import CheckResult
from specbench.check.rows import check_rows
from specbench.check.sampled import check_sampled
from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError
from specbench.runs.phase_progress import PhaseProgress


@dataclass(frozen=True)
class CheckContext:
    reference: list[tuple[int, ...]] | None = None  # [num_prompts] clean plain greedy outputs; None = computed
    reference_cross_check: ReferenceCrossCheck | None = None  # the reference against HF transformers (selftest)
    baseline: AcceptanceBaseline | None = None  # None: the baseline check is skipped
    baseline_source: str = ""  # where the baseline came from, for the detail line
    baseline_alpha: float = BASELINE_ALPHA
    budget: Budget = field(default_factory=lambda: BUDGETS["full"])


def _baseline(setup: CheckSetup, ctx: CheckContext) -> CheckResult:
    if ctx.baseline is None:
        return CheckResult("baseline", True, ctx.baseline_source or "no --baseline FILE given", 0.0, skipped=True)
    return check_baseline(setup, ctx.baseline, ctx.baseline_alpha, ctx.baseline_source)


def _greedy(setup: CheckSetup, ctx: CheckContext) -> CheckResult:
    """Lossless greedy; on a constrained setup (CheckSetup.grammars) also every output valid under its grammar."""
    if setup.is_constrained:
        return check_greedy_constrained(setup, ctx.reference, preemption=ctx.budget.preemption_reruns)
    return check_greedy(setup, ctx.reference, preemption=ctx.budget.preemption_reruns,
                        cross_check=ctx.reference_cross_check)


CHECK_FUNCTIONS: dict[str, Callable[[CheckSetup, CheckContext], CheckResult]] = {
    "greedy": _greedy,
    "sampled": lambda setup, ctx: check_sampled(setup, engine_runs=ctx.budget.sampled_engine_runs),
    "rows": lambda setup, ctx: check_rows(setup),
    "oracle": lambda setup, ctx: check_oracle(setup, preemption=ctx.budget.preemption_reruns),
    "invariants": lambda setup, ctx: check_invariants(setup, full_sweep=ctx.budget.full_invariant_sweep),
    "baseline": _baseline,
    "metrics": lambda setup, ctx: check_metrics(setup),
}
assert tuple(CHECK_FUNCTIONS) == CHECKS, "check/names.py lists every check once, in table order"


def run_checks(setup: CheckSetup, checks: tuple[str, ...] = CHECKS, context: CheckContext | None = None,
               progress: PhaseProgress | None = None) -> list[CheckResult]:
    """Every check runs with debug invariants off except the invariant sweep, so each one's detection is its own
    (each engine's EngineConfig.debug_invariants, set by check/setup.build_llm whatever the environment says).
    A check that raises inside the engine is a failing `crashed: ...` row; the others still run. `progress`: a line
    on stderr as each check starts and ends (the CLI's; a notebook or the selftest passes none)."""
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise SpecbenchError(f"unknown check(s) {', '.join(sorted(unknown))}; supported: {', '.join(CHECKS)}")
    ctx = context or CheckContext()
    setup = ctx.budget.apply(setup)
    results = []
    for name in checks:
        if progress is not None:
            progress.start(name)
        results.append(_run_one(name, setup, ctx))
        if progress is not None:
            progress.done(name, results[-1].verdict)
    return results


def _run_one(name: str, setup: CheckSetup, ctx: CheckContext) -> CheckResult:
    """One check, with the execution paths its engines under test took."""
    log = PathLog()
    result = run_guarded(name, lambda: CHECK_FUNCTIONS[name](replace(setup, paths=log), ctx))
    return replace(result, paths=log.taken())
