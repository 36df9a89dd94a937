"""Run the battery against the clean engine and every fault, per method, and build the mutation table.

Per seed (setups.py): a tiny target, a draft LM perturbed from it, and per speculative method of the proposer
registry its tiny drafter and prompts. Per seed also one row for the production plain engine (method none, overlapped
decoding): the greedy check against the reference. The greedy reference comes from the reference engine
(check/reference.py), itself checked against HF transformers on each tiny target once per seed (hf_reference.py).
Every check reports the execution paths its engines under test took (execution_paths.py); selftest/coverage.py turns
the clean rows into the coverage table. Seeds and rows are tasks (row_tasks.py): run in order in-process, or in
worker processes (parallel.py, `jobs`), with the same rows either way.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable

import torch

import specbench
from specbench.check.battery import CHECKS
from specbench.check.budget import BUDGETS, Budget
from specbench.check.result import CheckResult
from specbench.engine.builder import resolve_device
from specbench.errors import SpecbenchError
from specbench.execution_paths import HYBRID as HYBRID_KIND
from specbench.execution_paths import MAMBA2 as MAMBA2_KIND
from specbench.execution_paths import MOE as MOE_KIND
from specbench.execution_paths import device_class
from specbench.faults import resolve_fault
from specbench.faults.catalog import (hybrid_faults, needs_constrained_decoding, needs_hybrid_target,
                                      needs_tree_shape, selftest_faults, window_moe_faults)
from specbench.faults.fault import LAYERS
from specbench.runs.phase_progress import PhaseProgress
from specbench.selftest import constrained as constrained_rows
from specbench.selftest.coverage import PathCoverage, path_coverage
from specbench.selftest.parallel import run_parallel
from specbench.selftest.row_record import RowRecord
from specbench.selftest.row_tasks import (
    SeedTask,
    SelftestRow,
    due_faults,
    plan_seed,
    run_row,
    target_indices,
)
from specbench.selftest.setups import (
    HYBRID,
    HYBRID_METHODS,
    HYBRID_TREE_METHODS,
    KV_CACHE_GB,
    MAMBA2,
    METHODS,
    PLAIN,
    WINDOW_MOE,
    check_methods,
    plain_setup,
    selftest_setups,
    target_label,
    target_methods,
    target_tree_methods,
)

# The selftest's names its callers (tests, reference_baselines.py) import from here; declared in setups / row_tasks.
__all__ = ["KV_CACHE_GB", "METHODS", "PLAIN", "SelftestRow", "false_alarms", "format_mutation_table", "method_label",
           "plain_setup",
           "run_selftest", "selftest_coverage", "selftest_ok", "selftest_setups", "timed_selftest"]


# Faults the selftest cannot see (tokens and statistics stay exact, or only a condition its rows never create):
# layer -> the gate stage that does. (Grammar faults run on the constrained rows.)
GATE_ONLY_LAYERS = {"logprobs": "logprobs", "speed": "speed", "stress": "stress"}


def run_selftest(
    *, seeds: tuple[int, ...] = (0,), methods: tuple[str, ...] = METHODS, faults: tuple[str, ...] | None = None,
    checks: tuple[str, ...] = CHECKS, num_steps: int = 3, device: str = "cpu",
    on_row: Callable[[SelftestRow], None] | None = None, engine_options: dict | None = None,
    budget: Budget = BUDGETS["full"], jobs: int | None = None, window_moe: bool = False, trees: bool = True,
    chunked: bool = True, hybrid: bool = False, constrained: bool = True, record_path: str | None = None,
) -> list[SelftestRow]:
    """Per seed: the plain row, then per method a clean row (models and prompts differ per seed) and one row per fault
    due there (row_tasks.due_faults: the first seed, or a path mutant's first seed whose clean row took its path).
    `window_moe` (the CLI's default): after the seeds, the first seed once more on the sliding-window + MoE tiny
    target (setups.WINDOW_MOE_METHODS of `methods`, and its plain row), where the window and MoE faults run.
    `hybrid` (the CLI's default): then the first seed once more on the hybrid (Qwen3-Next) tiny target
    (setups.HYBRID_METHODS of `methods`, and its plain row), where the hybrid-state faults run, and on the Mamba-2
    hybrid (Bamba) tiny target (setups.MAMBA2_METHODS, and its plain row: the Mamba-2 mixer's paths, no faults).
    `trees`: per seed also a tree row (setups.TREE_SHAPE) for each method that drafts trees, where the tree
    faults run. `chunked`: per seed also a chunked row (setups.CHUNKED_OPTIONS) for each method, its greedy and
    metrics checks only, where the chunked-prefill faults run. `constrained`: per seed also a constrained row for
    each method (selftest/constrained.py: every prompt under a grammar, the greedy check only), where the grammar
    faults run; skipped, saying so, without the grammar extra. `faults`: None = the device's default set (the
    grammar faults only where a constrained row runs); () or ("none",) = clean rows only (a false-alarm run).

    The baseline each row is checked against is the shipped reference for the seed and method
    (reference_baselines.py), never a measurement of the engine under test. `budget` trims the battery (check/budget.py;
    tests reach paths under the Triton interpreter with a small one). `jobs`: worker processes (None or 1: in-process,
    one row after another, `on_row` in table order; more: `on_row` in completion order; the CLI's `--jobs auto` is
    parallel.default_jobs); the rows and their order are the same for every value. `record_path`: a JSON-lines file
    each finished row is appended to; the rows it holds from a run with the same options are taken, not run again
    (selftest/row_record.py: a selftest longer than a machine's time limit finishes over several runs).
    """
    # the constrained rows that host the grammar faults run (greedy is their check)
    hosted = constrained and "greedy" in checks and constrained_rows.is_available()
    if faults is None:  # the device's default: path mutants only where their path is production
        faults = selftest_faults(device_class(resolve_device(device).type))
        if window_moe:
            faults += window_moe_faults(device_class(resolve_device(device).type))
        if hybrid:
            faults += hybrid_faults(device_class(resolve_device(device).type))
        faults = tuple(n for n in faults if hosted or not needs_constrained_decoding(n))
    chosen = [f for f in (resolve_fault(n) for n in faults) if f is not None]  # unknown names fail here; none: none
    unseen = [f for f in chosen if f.layer in GATE_ONLY_LAYERS]
    if unseen:  # the selftest compares tokens and statistics, which these leave exact: it would report them missed
        what, stage = LAYERS[unseen[0].layer].breaks, GATE_ONLY_LAYERS[unseen[0].layer]
        raise SpecbenchError(f"fault {unseen[0].name!r} {what}, which the selftest does not check: "
                             f"`specbench gate` (its {stage} stage) does")
    stateful = [f for f in chosen if needs_hybrid_target(f.name)]
    if stateful and not (hybrid and target_methods(HYBRID, tuple(methods))):  # inert elsewhere: it would be missed
        raise SpecbenchError(f"fault {stateful[0].name!r} acts on a hybrid target's recurrent state: it runs on the "
                             f"selftest's hybrid target (--hybrid, with a method of {', '.join(HYBRID_METHODS)})")
    tree_state = [f for f in stateful if needs_tree_shape(f.name)]
    if tree_state and not (hybrid and trees and target_tree_methods(HYBRID, tuple(methods))):  # no hybrid tree row hosts them
        raise SpecbenchError(f"fault {tree_state[0].name!r} acts on a hybrid target's tree verify: it runs on the "
                             f"selftest's hybrid tree row (--hybrid and trees on, with a method of "
                             f"{', '.join(HYBRID_TREE_METHODS)})")
    grammar = [f.name for f in chosen if needs_constrained_decoding(f.name)]
    if grammar and not hosted:  # no constrained row would host them
        why = ("--no-constrained" if not constrained else "their check, greedy, is not run" if "greedy" not in checks
               else constrained_rows.NO_EXTRA)
        raise SpecbenchError(f"fault {grammar[0]!r} runs on the constrained rows only: {why}")
    if not seeds:
        raise SpecbenchError("selftest needs at least one seed")
    if not checks or set(checks) - set(CHECKS):
        raise SpecbenchError(f"selftest checks {', '.join(checks) or '(none)'}: supported: {', '.join(CHECKS)}")
    check_methods(methods)  # before any worker starts
    jobs = 1 if jobs is None else jobs
    if jobs < 1:
        raise SpecbenchError(f"selftest jobs must be at least 1, got {jobs}")
    record = None if record_path is None else RowRecord(record_path, {
        "device": device_class(resolve_device(device).type), "seeds": list(seeds), "methods": list(methods),
        "faults": [f.name for f in chosen], "checks": list(checks), "num_steps": num_steps, "budget": budget.name,
        "engine_options": engine_options or {}, "window_moe": window_moe, "trees": trees, "chunked": chunked,
        "hybrid": hybrid, "constrained": constrained, "version": specbench.__version__})
    torch.set_num_threads(1)  # tiny models: thread fork/join costs more than it saves
    with tempfile.TemporaryDirectory(prefix="specbench-selftest-") as tmp:
        tasks = [SeedTask(tmp, seed, tuple(methods), num_steps, device, engine_options, tuple(checks), budget,
                          trees=trees, chunked=chunked, constrained=constrained) for seed in seeds]
        if window_moe and target_methods(WINDOW_MOE, tuple(methods)):
            tasks.append(SeedTask(tmp, seeds[0], tuple(methods), num_steps, device, engine_options, tuple(checks),
                                  budget, WINDOW_MOE))
        if hybrid and target_methods(HYBRID, tuple(methods)):
            tasks.append(SeedTask(tmp, seeds[0], tuple(methods), num_steps, device, engine_options, tuple(checks),
                                  budget, HYBRID, trees=trees))
        if hybrid and target_methods(MAMBA2, tuple(methods)) and "greedy" in checks:  # its rows: greedy only
            tasks.append(SeedTask(tmp, seeds[0], tuple(methods), num_steps, device, engine_options, tuple(checks),
                                  budget, MAMBA2))
        if jobs > 1:
            return run_parallel(tasks, chosen, jobs, on_row, record=record)
        rows: list[SelftestRow] = []

        def run_one(task: RowTask) -> SelftestRow:
            row = None if record is None else record.get(task)
            if row is None:
                row = run_row(task)
                if record is not None:
                    record.add(row)
            return row

        # (method, target, tree, chunked, constrained) -> faults run
        done: dict[tuple[str, str, bool, bool, bool], set[str]] = {}
        for task, index in zip(tasks, target_indices(tasks)):
            for clean_task in plan_seed(task).clean_rows:
                rows.append(run_one(clean_task))
                if on_row is not None:
                    on_row(rows[-1])
                for fault in due_faults(chosen, clean_task.method, index, rows[-1], done):
                    rows.append(run_one(clean_task.with_inject(fault.name)))
                    if on_row is not None:
                        on_row(rows[-1])
        return rows


def selftest_coverage(rows: list[SelftestRow], device: str = "cpu", checks: tuple[str, ...] = CHECKS) -> PathCoverage:
    """Path x check coverage of the clean rows on `device` (cpu | cuda | auto | cuda:N); with rows on the hybrid
    target, its recurrent-state paths are production (with rows on the Mamba-2 one, its mixer's too; with rows on
    the window + MoE target, the MoE prefill's)."""
    kinds = ((HYBRID_KIND,) if any(row.target in (HYBRID, MAMBA2) for row in rows) else ()) + (
        (MAMBA2_KIND,) if any(row.target == MAMBA2 for row in rows) else ()) + (
        (MOE_KIND,) if any(row.target == WINDOW_MOE for row in rows) else ())
    return path_coverage([(row.method, row.results) for row in rows if row.inject is None],
                         device_class(resolve_device(device).type), checks, target_kinds=kinds)


def _cell(r: CheckResult) -> str:
    mark = "skip" if r.skipped else ("CRASHED" if r.is_crashed else "DETECTED" if not r.passed else "pass")
    return " ".join(x for x in (mark, r.note, f"{r.seconds:.1f}s") if x)


def format_mutation_table(rows: list[SelftestRow], checks: tuple[str, ...] = CHECKS) -> str:
    widths = [max([len(c)] + [len(_cell(r)) for row in rows for r in row.results if r.name == c]) + 2 for c in checks]
    width = max([12] + [len(method_label(row)) + 1 for row in rows])  # "eagle3 chunked" outgrows 12
    head = (f"{'method':<{width}}{'seed':>5}  {'target':<11}{'engine':<28}"
            + "".join(f"{c:>{w}}" for c, w in zip(checks, widths)))
    lines = [head + "   verdict", "-" * (len(head) + 12)]
    for row in rows:
        cells = "".join(f"{_cell(r):>{w}}" for r, w in zip(row.results, widths))
        lines.append(f"{method_label(row):<{width}}{row.seed:>5}  {target_label(row.target, row.seed):<11}"
                     f"{row.inject or 'clean':<28}{cells}   {row_verdict(row)}")
    return "\n".join(lines)


def row_verdict(row: SelftestRow) -> str:
    if row.inject is None:
        return "ok" if not row.detected else "FALSE ALARM"
    return "detected" if row.detected else "MISSED"


def row_progress(quiet: bool) -> Callable[[SelftestRow], None] | None:
    """run_selftest's `on_row` for a command line: a line per finished row on stderr in the sweep's style
    (runs/phase_progress.py; the number of rows is known only as the clean rows finish), so a long run shows where
    it is (the table comes at the end); None when quiet."""
    if quiet:
        return None
    progress = PhaseProgress("selftest row", None, quiet=False)

    def on_row(row: SelftestRow) -> None:
        target = f" {row.target}" if row.target else ""
        progress.done(f"{method_label(row)} seed {row.seed}{target} {row.inject or 'clean'}", row_verdict(row),
                      seconds=sum(r.seconds for r in row.results))

    return on_row


def method_label(row: SelftestRow) -> str:
    """The method, and its tree shape on a tree row (e.g. `eagle3 t2/6`), `chunked` on a chunked row, `grammar` on
    a constrained row."""
    shape = row.shape
    label = row.method if not shape.is_tree else f"{row.method} t{shape.eagle_topk}/{shape.num_draft_tokens or 'all'}"
    return label + (" chunked" if row.chunked else "") + (" grammar" if row.constrained else "")


def false_alarms(rows: list[SelftestRow]) -> list[SelftestRow]:
    """Clean rows some check failed on."""
    return [row for row in rows if row.inject is None and row.detected]


def selftest_ok(rows: list[SelftestRow]) -> bool:
    return all((row.inject is None) != row.detected for row in rows)


def timed_selftest(**kwargs) -> tuple[list[SelftestRow], float]:
    start = time.perf_counter()
    rows = run_selftest(**kwargs)
    return rows, time.perf_counter() - start
