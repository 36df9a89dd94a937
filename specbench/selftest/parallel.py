"""`selftest --jobs N`: seeds' preparations and rows in N spawned worker processes (the tiny models are launch and
CPU bound, so one process leaves a GPU idle).

The schedule: every seed's preparation (row_tasks.plan_seed: models written once under the run's directory, the
references) is submitted first; each plan's clean rows are submitted when it arrives; a method's fault rows at seed
index i are chosen (row_tasks.due_faults, in seed order, as the sequential loop does) once its clean rows of seeds
0..i are in, and submitted then. Rows come back in completion order (`on_row` sees them so); the returned list is
in the sequential table order. Workers are spawned, never forked (CUDA cannot be forked): they inherit the
environment and sys.path, not in-process patches. A task that raises ends the run with one SpecbenchError naming the
task (a check that raises inside the engine is a crashed result, as in-process).

A worker that dies (a native crash: on CUDA a mutant's out-of-range index is a device-side assert that aborts the
process, where on CPU it raises and is a crashed result) breaks the whole pool, and every task then running dies
with it. Each task a worker was running (workers report starts and ends on a queue) is run again alone in a pool of
its own; the rest go to a fresh pool. A mutant row that kills its own process alone is a detected row ("crashed:
the worker process died"); a clean row or a preparation that does is the run's error, as before. A worker whose
CUDA context a crash left unusable (the error was caught, so it lives on) exits when its next task starts, so that
task is run again alone instead of crashing there as a false alarm.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from specbench.check.result import CheckResult
from specbench.engine.builder import resolve_device
from specbench.errors import SpecbenchError
from specbench.execution_paths import device_class
from specbench.faults.fault import Fault
from specbench.selftest.row_record import RowRecord
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


WORKER_DIED = ("crashed: the worker process died running this row alone (a native crash, e.g. a CUDA device-side "
               "assert)")
MAX_BREAKS = 64  # pools broken in one run past which the run stops (something kills every worker, not one row)
_EXIT_POISONED = 70  # a worker's exit status when a crash left its CUDA context unusable

_events = None  # in a worker: the queue it reports task starts and ends on (task id, started)
_poisoned = False  # in a worker: an earlier task left its CUDA context unusable


def _init_worker(events) -> None:
    import torch

    global _events
    _events = events
    torch.set_num_threads(1)  # tiny models: thread fork/join costs more than it saves (as in the parent)


def _tracked(task_id: int, run: Callable, arg):
    """A worker's task: reported started, run, reported ended; a worker whose CUDA context an earlier task's crash
    made unusable exits first (its pool breaks and this task runs again alone)."""
    global _poisoned
    _events.put((task_id, True))
    if _poisoned:
        os._exit(_EXIT_POISONED)
    try:
        return run(arg)
    finally:
        _events.put((task_id, False))
        _poisoned = not _cuda_usable()


def _cuda_usable() -> bool:
    import torch

    if not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()  # raises once a device-side assert has fired in this context
        return True
    except Exception:
        return False


@dataclass
class _Entry:
    """A submitted task: where its result goes, the row task (None: a seed's preparation), its argument, its id
    and the pool it runs in."""
    slot: _Slot
    task: RowTask | None
    arg: object
    task_id: int
    pool: ProcessPoolExecutor
    isolated: bool = False  # alone in a pool of its own (a task a broken pool was running)


@dataclass
class _Pools:
    """The run's main pool and the single-task pools of tasks a broken pool was running; which tasks have started
    and not ended (from the workers' reports)."""
    jobs: int
    context: object
    events: object
    main: ProcessPoolExecutor | None = None
    running: set[int] = field(default_factory=set)
    isolated: list[ProcessPoolExecutor] = field(default_factory=list)
    breaks: int = 0

    def new_pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=workers, mp_context=self.context, initializer=_init_worker,
                                   initargs=(self.events,))

    def fresh_main(self) -> ProcessPoolExecutor:
        self.main = self.new_pool(self.jobs)
        return self.main

    def alone(self) -> ProcessPoolExecutor:
        pool = self.new_pool(1)
        self.isolated.append(pool)
        return pool

    def drain(self) -> None:
        while not self.events.empty():
            task_id, started = self.events.get()
            (self.running.add if started else self.running.discard)(task_id)

    def shutdown(self, wait_for_workers: bool) -> None:
        for pool in [self.main, *self.isolated]:
            if pool is not None:
                pool.shutdown(wait=wait_for_workers, cancel_futures=not wait_for_workers)


def run_parallel(seed_tasks: list[SeedTask], chosen: list[Fault], jobs: int,
                 on_row: Callable[[SelftestRow], None] | None = None,
                 row_runner: Callable[[RowTask], SelftestRow] = run_row,
                 record: RowRecord | None = None) -> list[SelftestRow]:
    """`row_runner`: what a worker runs for a row (tests pass one that crashes its process). `record`: rows it holds
    are taken instead of submitted; every row that comes back is added to it (by this process only)."""
    seeds = tuple(t.seed for t in seed_tasks)
    context = multiprocessing.get_context("spawn")
    pools = _Pools(jobs, context, context.SimpleQueue())  # SimpleQueue: a report is written before a crash can lose it
    pools.fresh_main()
    pending: dict[Future, _Entry] = {}
    ids = itertools.count()
    # A lane: (method, is a tree row, is a chunked row, is a constrained row); a method's rows of each kind choose
    # their faults apart (due_faults).
    # (lane, seed index) -> (row, task)
    clean_tasks: dict[tuple[tuple[str, bool, bool, bool], int], tuple[int, RowTask]] = {}
    clean_rows: dict[tuple[tuple[str, bool, bool, bool], int], SelftestRow] = {}
    next_seed: dict[tuple[str, bool, bool, bool], int] = {}  # lane -> the seed index whose faults are chosen next
    done: dict[tuple[str, str, bool, bool, bool], set[str]] = {}  # due_faults' bookkeeping, per method, target, kind
    indices = target_indices(seed_tasks)  # due_faults' seed index: among the tasks of the same target
    rows: dict[tuple[int, int, int], SelftestRow] = {}

    def put(slot: _Slot, task: RowTask | None, arg, pool: ProcessPoolExecutor, isolated: bool = False) -> None:
        task_id = next(ids)
        runner = plan_seed if task is None else row_runner
        pending[pool.submit(_tracked, task_id, runner, arg)] = _Entry(slot, task, arg, task_id, pool, isolated)

    def submit(slot: _Slot, task: RowTask) -> None:
        recorded = None if record is None else record.get(task)
        if recorded is not None:
            take_row(slot, recorded)
        else:
            put(slot, task, task, pools.main)

    def choose_faults(lane: tuple[str, bool, bool, bool]) -> None:
        """Fault rows of `lane` at every seed index whose clean rows up to it are in, in seed order."""
        i = next_seed.setdefault(lane, 0)
        while (lane, i) in clean_rows:
            row_index, task = clean_tasks[(lane, i)]
            for k, fault in enumerate(due_faults(chosen, lane[0], indices[i], clean_rows[(lane, i)], done)):
                submit(_Slot(i, row_index, k), task.with_inject(fault.name))
            i += 1
        next_seed[lane] = i

    def accept(entry: _Entry, result: SeedPlan | SelftestRow) -> None:
        if isinstance(result, SeedPlan):
            for row_index, clean in enumerate(result.clean_rows):
                clean_tasks[(clean.lane, entry.slot.seed_index)] = (row_index, clean)
                submit(_Slot(entry.slot.seed_index, row_index), clean)
            return
        if record is not None:
            record.add(result)
        take_row(entry.slot, result)

    def take_row(slot: _Slot, result: SelftestRow) -> None:
        """A row in (run now or recorded earlier): into the table; a clean row lets its lane's faults be chosen."""
        rows[(slot.seed_index, slot.row_index, slot.fault_index)] = result
        if on_row is not None:
            on_row(result)
        if slot.fault_index == -1:
            clean_rows[(result.lane, slot.seed_index)] = result
            choose_faults(result.lane)

    def recover(broken: _Entry) -> None:
        """`broken`'s pool died: its task alone -> a crashed mutant row (or the run's error); a shared pool's tasks
        that were running -> each alone, the others -> a fresh pool."""
        pools.breaks += 1
        label = broken.slot.label(seeds, broken.task)
        if pools.breaks > MAX_BREAKS:
            raise SpecbenchError(f"selftest worker processes died {pools.breaks} times (last while {label} was "
                                 f"pending); rerun with --jobs 1 to see it in-process")
        if broken.isolated:
            if broken.task is None or broken.task.inject is None:
                raise SpecbenchError(f"a selftest worker process died (killed, out of memory or a native crash) "
                                     f"while {label} was running alone; rerun with --jobs 1 to see it in-process")
            accept(broken, _died_row(broken.task))
            return
        pools.drain()
        same_pool = [f for f, e in pending.items() if e.pool is broken.pool]  # every one of them broken too
        doomed = [broken] + [pending.pop(f) for f in same_pool]
        if broken.pool is pools.main:
            pools.fresh_main()
        was_running = {e.task_id for e in doomed} & pools.running
        for entry in doomed:
            alone = entry.task_id in was_running or not was_running  # nothing reported: every one of them alone
            put(entry.slot, entry.task, entry.arg, pools.alone() if alone else pools.main, isolated=alone)

    try:
        for i, seed_task in enumerate(seed_tasks):
            put(_Slot(i), None, seed_task, pools.main)
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                entry = pending.pop(future, None)
                if entry is None:  # taken by an earlier recover() of its broken pool
                    continue
                try:
                    result = future.result()
                except BrokenProcessPool:
                    recover(entry)
                    continue
                except Exception as e:
                    raise SpecbenchError(f"selftest worker failed on {entry.slot.label(seeds, entry.task)}: "
                                         f"{type(e).__name__}: {e}") from e
                if entry.isolated:
                    entry.pool.shutdown(wait=False)
                accept(entry, result)
    except BaseException:
        pools.shutdown(wait_for_workers=False)  # running rows finish in the workers; nothing new starts
        raise
    pools.shutdown(wait_for_workers=True)
    return [rows[key] for key in sorted(rows)]


def _died_row(task: RowTask) -> SelftestRow:
    """A mutant row whose process died running it alone: detected, by a crash (its first check's)."""
    results = tuple(CheckResult(name, False, WORKER_DIED, 0.0, is_crashed=True) if i == 0 else
                    CheckResult(name, True, "not run: the row's process died in its first check", 0.0, skipped=True)
                    for i, name in enumerate(task.checks))
    return SelftestRow(task.method, task.seed, task.inject, results, task.target, task.shape, task.chunked,
                       task.constrained)
