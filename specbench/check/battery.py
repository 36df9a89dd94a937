"""Run the check battery for one setup (a notebook calls `run_checks`; the CLI prints its table)."""

from __future__ import annotations

from specbench.check.baseline import AcceptanceBaseline, check_baseline
from specbench.check.greedy import check_greedy
from specbench.check.invariant_sweep import check_invariants
from specbench.check.oracle import check_oracle
from specbench.check.result import CheckResult
from specbench.check.sampled import check_sampled
from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError

CHECKS = ("greedy", "sampled", "oracle", "invariants", "baseline")


def run_checks(
    setup: CheckSetup,
    checks: tuple[str, ...] = CHECKS,
    *,
    reference: list[tuple[int, ...]] | None = None,
    baseline: AcceptanceBaseline | None = None,
    tolerance: float = 0.05,
) -> list[CheckResult]:
    """Every check runs with debug invariants off except the invariant sweep, so each one's detection is its own."""
    unknown = set(checks) - set(CHECKS)
    if unknown:
        raise SpecbenchError(f"unknown check(s) {', '.join(sorted(unknown))}; supported: {', '.join(CHECKS)}")
    results = []
    for name in checks:
        if name == "greedy":
            results.append(check_greedy(setup, reference))
        elif name == "sampled":
            results.append(check_sampled(setup))
        elif name == "oracle":
            results.append(check_oracle(setup))
        elif name == "invariants":
            results.append(check_invariants(setup))
        elif name == "baseline":
            if baseline is None:
                results.append(CheckResult("baseline", True, "no --baseline FILE given", 0.0, skipped=True))
            else:
                results.append(check_baseline(setup, baseline, tolerance))
    return results
