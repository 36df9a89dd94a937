"""Which execution paths (execution_paths.py) the selftest's clean engines under test took, per check, and which
production paths of the device none of them reached (the selftest then fails: a fast path nothing guards)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.check.result import CheckResult
from specbench.execution_paths import ExecutionPath, production_paths
from specbench.extras import installed_extras
from specbench.speculation.registry import execution_paths


@dataclass(frozen=True)
class PathCoverage:
    device: str  # device class the selftest ran on: cpu | cuda
    methods: tuple[str, ...]  # methods whose engines were under test ("none": the production plain engine)
    checks: tuple[str, ...]  # table columns
    # [len(checks)] per check, the union of the paths its clean engines under test took over every method and seed
    taken_by_check: tuple[frozenset[str], ...]
    # The registry it is judged against: the engine's paths and every registered proposer class's, methods resolved
    # (speculation/registry.py execution_paths()).
    paths: tuple[ExecutionPath, ...]
    target_kinds: tuple[str, ...] = ()  # kinds of the targets the rows ran (execution_paths.HYBRID), beyond the dense

    @property
    def taken(self) -> frozenset[str]:
        return frozenset().union(*self.taken_by_check)

    @property
    def required(self) -> tuple[ExecutionPath, ...]:
        """Production paths of this device that engines of these methods can take."""
        return production_paths(self.device, self.methods, self.paths, self.target_kinds, installed_extras())

    @property
    def unexercised(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.required if p.name not in self.taken)

    @property
    def is_complete(self) -> bool:
        return not self.unexercised


def path_coverage(results: list[tuple[str, tuple[CheckResult, ...]]], device: str, checks: tuple[str, ...],
                  paths: tuple[ExecutionPath, ...] | None = None, target_kinds: tuple[str, ...] = ()) -> PathCoverage:
    """`results`: (method, check results in `checks` order) of every clean row (mutant rows are not coverage: a path
    counts when the engine users run took it under a check). `paths`: None = every registered path (read now, so a
    proposer class registered since is in). `target_kinds`: the kinds of target the rows ran beyond the dense ones
    (a hybrid target's paths are required only where one ran)."""
    taken = tuple(frozenset().union(*(r.paths for _, rs in results for r in rs if r.name == c)) for c in checks)
    methods = tuple(dict.fromkeys(m for m, _ in results))
    return PathCoverage(device, methods, checks, taken, execution_paths() if paths is None else paths, target_kinds)


def format_coverage(cov: PathCoverage) -> str:
    """Path x check: `x` where the check's engines took the path; the last column says what the path is here."""
    required = {p.name for p in cov.required}
    width = max(len(p.name) for p in cov.paths) + 2
    head = f"{'path (' + cov.device + ')':<{width}}" + "".join(f"{c:>{max(len(c), 4) + 2}}" for c in cov.checks)
    lines = [head + "   here", "-" * (len(head) + 24)]
    for p in cov.paths:
        cells = "".join(f"{'x' if p.name in t else '.':>{max(len(c), 4) + 2}}"
                        for c, t in zip(cov.checks, cov.taken_by_check))
        if p.name in required:
            status = "production" if p.name in cov.taken else "production, UNEXERCISED"
        elif cov.device in p.production_on and p.target_kind and p.target_kind not in cov.target_kinds:
            status = f"production, no {p.target_kind} target run"
        elif cov.device in p.production_on and p.extra and p.extra not in installed_extras():
            status = f"not production here ({p.extra} extra missing)"  # no run here can take it
        elif cov.device in p.production_on:  # none of its methods ran: an `x` came from another method's engine
            status = "production, taken by another method" if p.name in cov.taken else "production, method not run"
        else:
            status = "taken" if p.name in cov.taken else "not production here"
        lines.append(f"{p.name:<{width}}{cells}   {status}")
    return "\n".join(lines)


def coverage_verdict(cov: PathCoverage) -> str:
    if cov.is_complete:
        return f"coverage: all {len(cov.required)} production paths of {cov.device} exercised"
    return (f"coverage FAILED: production paths of {cov.device} no check exercised: {', '.join(cov.unexercised)} "
            f"(a fast path without the sentinel; execution_paths.py)")
