"""`selftest --jobs N`: seeds' preparations and rows in N spawned worker processes (the tiny models are launch and
CPU bound, so one process leaves a GPU idle).

The schedule: every seed's preparation (row_tasks.plan_seed: models written once under the run's directory, the
references) is submitted first; each plan's clean rows are submitted when it arrives; a method's fault rows at seed
index i are chosen (row_tasks.due_faults, in seed order, as the sequential loop does) once its clean rows of seeds
0..i are in, and submitted then. Rows come back in completion order (`on_row` sees them so); the returned list is
in the sequential table order. Workers are spawned, never forked (CUDA cannot be forked): they inherit the
environment and sys.path, not in-process patches. A task that raises, or a worker that dies, ends the run with one
SpecbenchError naming the task (a check that raises inside the engine is a crashed result, as in-process).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from specbench.engine.builder import resolve_device
from specbench.errors import SpecbenchError
from specbench.execution_paths import device_class
from specbench.faults.fault import Fault
from specbench.selftest.tiny import VARIANTS
from specbench.selftest.row_tasks import (
    RowTask,
    SeedPlan,
    SeedTask,
    SelftestRow,
    due_faults,
    plan_seed,
    run_row,
    target_indices,
)

MAX_AUTO_JOBS = 8  # past this the tiny rows contend for the GPU's launch queue more than they overlap


def default_seeds(device: str) -> tuple[int, ...]:
    """`--seeds` unset: on CUDA one seed per tiny variant (tiny.VARIANTS: biased, llama, qwen3), as each variant
    exists to reach a CUDA fast path (the qwen3 variant's q/k norm is what sends its target, and nothing else, to
    proj.fused); on CPU, where those paths are not production, the first two."""
    if device_class(resolve_device(device).type) != "cuda":
        return (0, 1)
    return tuple(range(len(VARIANTS)))


def default_jobs(device: str) -> int:
    """`--jobs auto`: on CUDA half the CPU cores (each worker is one busy Python thread launching kernels), on CPU
    every core (the selftest runs its tiny models on one thread: sequential rows leave the other cores idle; 2
    workers on this 2-core box: 104 s against 189 s), at most MAX_AUTO_JOBS."""
    cores = os.cpu_count() or 1
    if device_class(resolve_device(device).type) != "cuda":
        return max(1, min(MAX_AUTO_JOBS, cores))
    return max(1, min(MAX_AUTO_JOBS, cores // 2))


@dataclass(frozen=True)
class _Slot:
    """Where a task's result goes: its seed index, its clean row's place in the seed's plan, its fault's place
    among the faults due there (-1: the clean row; None: the seed's preparation)."""
    seed_index: int
    row_index: int | None = None
    fault_index: int = -1

    def label(self, seeds: tuple[int, ...], task: RowTask | None) -> str:
        if task is None:
            return f"seed {seeds[self.seed_index]} preparation"
        return f"{task.method} seed {task.seed} {task.inject or 'clean'}"


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # tiny models: thread fork/join costs more than it saves (as in the parent)


def run_parallel(seed_tasks: list[SeedTask], chosen: list[Fault], jobs: int,
                 on_row: Callable[[SelftestRow], None] | None = None) -> list[SelftestRow]:
    seeds = tuple(t.seed for t in seed_tasks)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker)
    pending: dict[Future, tuple[_Slot, RowTask | None]] = {}
    # A lane: (method, is a tree row, is a chunked row, is a constrained row); a method's rows of each kind choose
    # their faults apart (due_faults).
    # (lane, seed index) -> (row, task)
    clean_tasks: dict[tuple[tuple[str, bool, bool, bool], int], tuple[int, RowTask]] = {}
    clean_rows: dict[tuple[tuple[str, bool, bool, bool], int], SelftestRow] = {}
    next_seed: dict[tuple[str, bool, bool, bool], int] = {}  # lane -> the seed index whose faults are chosen next
    done: dict[tuple[str, str, bool, bool, bool], set[str]] = {}  # due_faults' bookkeeping, per method, target, kind
    indices = target_indices(seed_tasks)  # due_faults' seed index: among the tasks of the same target
    rows: dict[tuple[int, int, int], SelftestRow] = {}

    def submit(slot: _Slot, task: RowTask) -> None:
        pending[pool.submit(run_row, task)] = (slot, task)

    def choose_faults(lane: tuple[str, bool, bool, bool]) -> None:
        """Fault rows of `lane` at every seed index whose clean rows up to it are in, in seed order."""
        i = next_seed.setdefault(lane, 0)
        while (lane, i) in clean_rows:
            row_index, task = clean_tasks[(lane, i)]
            for k, fault in enumerate(due_faults(chosen, lane[0], indices[i], clean_rows[(lane, i)], done)):
                submit(_Slot(i, row_index, k), task.with_inject(fault.name))
            i += 1
        next_seed[lane] = i

    try:
        for i, seed_task in enumerate(seed_tasks):
            pending[pool.submit(plan_seed, seed_task)] = (_Slot(i), None)
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                slot, task = pending.pop(future)
                result = _result(future, slot.label(seeds, task))
                if isinstance(result, SeedPlan):
                    for row_index, clean in enumerate(result.clean_rows):
                        clean_tasks[(clean.lane, slot.seed_index)] = (row_index, clean)
                        submit(_Slot(slot.seed_index, row_index), clean)
                    continue
                rows[(slot.seed_index, slot.row_index, slot.fault_index)] = result
                if on_row is not None:
                    on_row(result)
                if slot.fault_index == -1:
                    lane = result.lane
                    clean_rows[(lane, slot.seed_index)] = result
                    choose_faults(lane)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # running rows finish in the workers; nothing new starts
        raise
    pool.shutdown()
    return [rows[key] for key in sorted(rows)]


def _result(future: Future, label: str) -> SeedPlan | SelftestRow:
    try:
        return future.result()
    except BrokenProcessPool as e:
        raise SpecbenchError(f"a selftest worker process died (killed, out of memory or a native crash) while "
                             f"{label} was pending; rerun with --jobs 1 to see it in-process") from e
    except Exception as e:
        raise SpecbenchError(f"selftest worker failed on {label}: {type(e).__name__}: {e}") from e
