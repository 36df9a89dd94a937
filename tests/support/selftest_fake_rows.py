"""Row runners for selftest/parallel.py's tests, importable by its spawned workers: rows that cost nothing (a fake
greedy verdict: a mutant row detected, a clean one passing), one mutant whose row kills its process the way a CUDA
device-side assert does, and one whose row leaves its worker's CUDA context unusable (as a caught device assert
does) so that the worker's next task must not run there."""

from __future__ import annotations

import os

from specbench.check.result import CheckResult
from specbench.selftest.row_tasks import RowTask, SelftestRow

KILLS_ITS_PROCESS = "draft-kv-slice"
POISONS_ITS_WORKER = "bonus-from-wrong-row"


def fake_row(task: RowTask) -> SelftestRow:
    if task.inject == KILLS_ITS_PROCESS:
        os._exit(134)  # what an aborted process looks like to its pool (SIGABRT's status, no core file)
    if task.inject == POISONS_ITS_WORKER:
        import specbench.selftest.parallel as parallel

        parallel._poisoned = True  # what _cuda_usable() finds after a caught device-side assert
    results = tuple(CheckResult(name, task.inject is None, "fake", 0.0) for name in task.checks)
    return SelftestRow(task.method, task.seed, task.inject, results, task.target, task.shape, task.chunked,
                       task.constrained)


def dies_always(task: RowTask) -> SelftestRow:
    os._exit(134)
