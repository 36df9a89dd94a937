"""Run the battery against the clean engine and every fault; build the mutation table."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import torch

from specbench.check.baseline import measure_acceptance
from specbench.check.battery import CHECKS, run_checks
from specbench.check.greedy import reference_outputs
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup
from specbench.faults import FAULTS
from specbench.selftest.tiny import build_tiny_pair, random_prompts


@dataclass(frozen=True)
class SelftestRow:
    inject: str | None  # None = the clean engine
    results: tuple[CheckResult, ...]

    @property
    def detected(self) -> bool:
        return any(not r.passed for r in self.results)


def run_selftest(
    *, seeds: tuple[int, ...] = (0,), faults: tuple[str, ...] | None = None, checks: tuple[str, ...] = CHECKS,
    num_steps: int = 3, on_row=None,
) -> list[SelftestRow]:
    """Clean rows (one per seed: prompts and models differ) then one row per fault on the first seed."""
    torch.set_num_threads(1)  # tiny models: thread fork/join costs more than it saves
    rows: list[SelftestRow] = []
    with tempfile.TemporaryDirectory(prefix="specbench-selftest-") as tmp:
        for i, seed in enumerate(seeds):
            target, draft = build_tiny_pair(f"{tmp}/{seed}", seed=seed)
            prompts = tuple(tuple(p) for p in random_prompts(6, seed=seed))
            setup = CheckSetup(target, "draft", draft, num_steps, prompts, seed=seed)
            reference = reference_outputs(setup)
            baseline = measure_acceptance(setup)
            names = [None] + list(faults if faults is not None else FAULTS) if i == 0 else [None]
            for name in names:
                row = SelftestRow(name, tuple(run_checks(setup.with_inject(name), checks, reference=reference,
                                                         baseline=baseline)))
                rows.append(row)
                if on_row is not None:
                    on_row(row)
    return rows


def format_mutation_table(rows: list[SelftestRow], checks: tuple[str, ...] = CHECKS) -> str:
    head = f"{'engine':<28}" + "".join(f"{c:>18}" for c in checks) + "   verdict"
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = []
        for r in row.results:
            mark = "skip" if r.skipped else ("DETECTED" if not r.passed else "pass")
            cells.append(f"{mark + f' {r.seconds:.1f}s':>18}")
        if row.inject is None:
            verdict = "ok" if not row.detected else "FALSE ALARM"
        else:
            verdict = "detected" if row.detected else "MISSED"
        lines.append(f"{row.inject or 'clean':<28}" + "".join(cells) + f"   {verdict}")
    return "\n".join(lines)


def selftest_ok(rows: list[SelftestRow]) -> bool:
    return all((row.inject is None) != row.detected for row in rows)


def timed_selftest(**kwargs) -> tuple[list[SelftestRow], float]:
    start = time.perf_counter()
    rows = run_selftest(**kwargs)
    return rows, time.perf_counter() - start
