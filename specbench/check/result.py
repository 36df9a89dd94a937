"""One check's verdict and the battery's table."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import ExitStatus

# check/setup.py's marker in a row whose forced-preemption run preempted nothing (declared here: result is the leaf)
NOT_COVERED = "preemption NOT covered"


@dataclass(frozen=True)
class CheckResult:
    name: str  # greedy | sampled | oracle | invariants | baseline
    passed: bool
    detail: str  # one line: what was compared and, on failure, where it first went wrong
    seconds: float
    skipped: bool = False  # not applicable (e.g. no draft model for the oracle); counts as passed
    note: str = ""  # a few characters for a mutation-table cell (e.g. the sampled test's p-value and power)
    is_crashed: bool = False  # the check raised inside the engine; detail is `crashed: <one line>`
    # Execution paths (execution_paths.py) the engines under test took in this check; reference engines excluded.
    paths: frozenset[str] = frozenset()

    @property
    def verdict(self) -> str:
        return "SKIP" if self.skipped else ("PASS" if self.passed else "CRASH" if self.is_crashed else "FAIL")


def format_table(results: list[CheckResult], title: str = "") -> str:
    lines = [title] if title else []
    width = max((len(r.name) for r in results), default=5)
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.verdict}  {r.seconds:6.2f}s  {r.detail}")
    uncovered = [r.name for r in results if NOT_COVERED in r.detail]
    if uncovered:
        lines.append(f"WARNING: {NOT_COVERED} in {', '.join(uncovered)}: the forced-preemption runs preempted nothing "
                     f"(their rows say why); those rows vouch for the outputs, not for preemption")
    return "\n".join(lines)


def check_exit_status(results: list[CheckResult]) -> int:
    """CRASHED when a check raised (its verdict is missing), else FAILED when one failed, else PASSED."""
    if any(r.is_crashed for r in results):
        return ExitStatus.CRASHED
    return ExitStatus.PASSED if all(r.passed for r in results) else ExitStatus.FAILED
