"""One seed's preparation and one mutation-table row, as picklable tasks: the sequential selftest runs them in order
in-process, `--jobs N` in spawned worker processes (parallel.py). Both run these same functions on the same seeded
inputs, so a row's verdicts do not depend on where it ran.

A seed's preparation writes its tiny models under the run's temporary directory (setups.py) and computes, once per
(target, prompts), the greedy reference and its HF cross check; a row task carries paths and token ids only, so a
worker loads the models rather than rebuilding them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specbench.check.battery import CheckContext, run_checks
from specbench.check.budget import Budget
from specbench.check.greedy import reference_outputs
from specbench.check.reference import ReferenceCrossCheck
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup
from specbench.faults.catalog import (needs_chunked_prefill, needs_constrained_decoding, needs_hybrid_target,
                                      needs_tree_shape, needs_window_moe_target, runs_on_tree_rows)
from specbench.faults.fault import Fault
from specbench.selftest import constrained as constrained_rows
from specbench.selftest.hf_reference import cross_check_reference
from specbench.selftest.reference_baselines import (
    SHIPPED_NUM_STEPS,
    SHIPPED_SEEDS,
    reference_baseline,
    reference_source,
)
from specbench.selftest.setups import (
    CHUNKED_OPTIONS,
    HYBRID,
    HYBRID_NOT_EXERCISED,
    MAMBA2,
    PLAIN,
    SEED_TARGET,
    TREE_SHAPE,
    WINDOW_MOE,
    plain_setup,
    selftest_setups,
    target_tree_methods,
    tree_methods,
)
from specbench.speculation.draft_shape import CHAIN, DraftShape


@dataclass(frozen=True)
class SelftestRow:
    method: str  # one of METHODS, or PLAIN
    seed: int
    inject: str | None  # None = the clean engine
    results: tuple[CheckResult, ...]
    target: str = SEED_TARGET  # "" = the seed's own tiny target; else setups.TARGETS' extra target
    shape: DraftShape = CHAIN  # the drafts' shape (a tree row: setups.TREE_SHAPE)
    chunked: bool = False  # a chunked row (setups.CHUNKED_OPTIONS): the greedy and metrics checks only
    constrained: bool = False  # a constrained row (selftest/constrained.py): the greedy check only

    @property
    def lane(self) -> tuple[str, bool, bool, bool]:
        """(method, tree row, chunked row, constrained row): a method's rows of each kind choose their faults apart
        (due_faults)."""
        return self.method, self.shape.is_tree, self.chunked, self.constrained

    @property
    def detected(self) -> bool:
        return any(not r.passed for r in self.results)


@dataclass(frozen=True)
class SeedTask:
    """What one seed's preparation needs: its models go under `root` (a directory every worker can read)."""
    root: str
    seed: int
    methods: tuple[str, ...]
    num_steps: int
    device: str
    engine_options: dict | None  # EngineConfig fields over the check defaults (setups.selftest_setups)
    checks: tuple[str, ...]
    budget: Budget
    target: str = SEED_TARGET  # which tiny target the seed's setups are built on (setups.TARGETS)
    # the tree rows too (setups.TREE_SHAPE; methods that draft trees: setups.target_tree_methods)
    trees: bool = True
    chunked: bool = True  # the chunked rows too (setups.CHUNKED_OPTIONS, every method, seed targets only)
    # the constrained rows too (selftest/constrained.py, every method, seed targets only; their check is greedy)
    constrained: bool = True


@dataclass(frozen=True)
class RowTask:
    """One mutation-table row: the battery on `setup` (PLAIN: its greedy check on the production plain engine)."""
    method: str  # one of METHODS, or PLAIN
    seed: int
    inject: str | None  # None = the clean engine
    setup: CheckSetup  # the method's setup; PLAIN's is the seed's first method's (plain_setup turns it plain)
    checks: tuple[str, ...]
    context: CheckContext
    target: str = SEED_TARGET

    def with_inject(self, inject: str) -> RowTask:
        return replace(self, inject=inject)

    @property
    def shape(self) -> DraftShape:
        return self.setup.draft_shape

    @property
    def chunked(self) -> bool:
        return self.setup.engine.enable_chunked_prefill

    @property
    def constrained(self) -> bool:
        return self.setup.is_constrained

    @property
    def lane(self) -> tuple[str, bool, bool, bool]:
        return self.method, self.shape.is_tree, self.chunked, self.constrained


@dataclass(frozen=True)
class SeedPlan:
    seed: int
    clean_rows: tuple[RowTask, ...]  # table order: PLAIN first, then each method in the run's order


def plan_seed(task: SeedTask) -> SeedPlan:
    """The seed's setups, references and clean row tasks (a worker entry point)."""
    setups = selftest_setups(task.root, task.seed, task.methods, task.num_steps, task.device, task.engine_options,
                             task.target)
    references: dict[tuple, tuple[list[tuple[int, ...]], ReferenceCrossCheck | None]] = {}  # per (target, prompts)
    rows = []
    for method, setup in setups.items():
        key = (setup.engine.target, setup.prompts)
        if key not in references:
            reference = reference_outputs(task.budget.apply(setup))
            cross_check = None
            if "greedy" in task.checks:  # the reference itself, once per target and seed, against transformers
                cross_check = cross_check_reference(setup.engine.target, setup.prompts,
                                                    task.budget.apply(setup).max_tokens, reference)
            references[key] = (reference, cross_check)
            if len(references) == 1:  # the plain row: once per seed, on its first target
                rows.append(RowTask(PLAIN, task.seed, None, setup, task.checks, CheckContext(
                    reference=reference, reference_cross_check=cross_check, budget=task.budget), task.target))
        reference, cross_check = references[key]
        rows.append(RowTask(method, task.seed, None, setup, task.checks, CheckContext(
            reference=reference, reference_cross_check=cross_check, budget=task.budget,
            **_reference(method, task.seed, task.num_steps, task.target)), task.target))
    # Tree rows: every method of the run that drafts trees, once more with tree rounds (seed targets; on the hybrid
    # target HYBRID_TREE_METHODS; the window + MoE target's windows are refused for trees), against the same plain
    # reference.
    for method in target_tree_methods(task.target, tuple(setups)) if task.trees else ():
        setup = replace(setups[method], draft_shape=TREE_SHAPE)
        reference, cross_check = references[(setup.engine.target, setup.prompts)]
        rows.append(RowTask(method, task.seed, None, setup, task.checks, CheckContext(
            reference=reference, reference_cross_check=cross_check, budget=task.budget,
            **_reference(method, task.seed, task.num_steps, task.target, TREE_SHAPE)), task.target))
    # Chunked rows: every method once more with chunked prefill, its greedy check against the same whole-prompt
    # reference (seed targets only).
    for method in tuple(setups) if task.chunked and task.target == SEED_TARGET else ():
        setup = setups[method].with_engine(**CHUNKED_OPTIONS)
        reference, cross_check = references[(setup.engine.target, setup.prompts)]
        rows.append(RowTask(method, task.seed, None, setup, task.checks, CheckContext(
            reference=reference, reference_cross_check=cross_check, budget=task.budget), task.target))
    if task.constrained and "greedy" in task.checks and task.target == SEED_TARGET:
        rows.extend(_constrained_rows(task, setups, references))
    return SeedPlan(task.seed, tuple(rows))


def _constrained_rows(task: SeedTask, setups: dict[str, CheckSetup], references: dict) -> list[RowTask]:
    """Constrained rows: every method once more, each prompt under a grammar (selftest/constrained.py), its greedy
    check against the plain constrained reference (computed here once per target and prompts; none without the
    grammar extra: run_row skips the rows, saying so); a method that drafts trees once more with tree rounds."""
    from specbench.selftest.tiny_tokenizer import write_tiny_tokenizer

    tokenizer_dir = write_tiny_tokenizer(f"{task.root}/{task.seed}-tokenizer")
    constrained_references: dict[tuple, list[tuple[int, ...]] | None] = {}
    rows = []
    for method, setup in setups.items():
        key = (setup.engine.target, setup.prompts)
        setup = constrained_rows.constrained_setup(setup, references[key][0], tokenizer_dir)
        if key not in constrained_references:
            is_available = constrained_rows.is_available()
            constrained_references[key] = reference_outputs(task.budget.apply(setup)) if is_available else None
        rows.append(RowTask(method, task.seed, None, setup, task.checks, CheckContext(
            reference=constrained_references[key], budget=task.budget), task.target))
        if method in tree_methods(tuple(setups)) and task.trees:  # once more with tree rounds (grammar.tree_mask)
            rows.append(RowTask(method, task.seed, None, replace(setup, draft_shape=TREE_SHAPE), task.checks,
                                CheckContext(reference=constrained_references[key], budget=task.budget), task.target))
    return rows


def run_row(task: RowTask) -> SelftestRow:
    """The row's checks (a worker entry point); a check that raises is a crashed result (check/crash.py)."""
    if task.method == PLAIN:
        return _plain_row(task)
    if task.constrained:
        if not constrained_rows.is_available():
            return _checks_row(task, task.setup, (), constrained_rows.NO_EXTRA)
        return _checks_row(task, task.setup.with_inject(task.inject), ("greedy",),
                           "constrained decoding: the greedy check only (validity, identity with the plain "
                           "constrained reference)")
    if task.chunked:
        return _checks_row(task, task.setup.with_inject(task.inject), ("greedy", "metrics"),
                           "chunked prefill: the greedy and metrics checks only")
    if task.target == MAMBA2:  # its paths, HF cross-check and snapshots are the greedy check's; the invariant
        # sweep's ~20 runs would triple the row (~75 s on 2 busy cores): tests/models/test_bamba_vs_hf.py has INV-STATE
        return _checks_row(task, task.setup.with_inject(task.inject), ("greedy",),
                           "Mamba-2 target: the greedy check only")
    return SelftestRow(task.method, task.seed, task.inject,
                       tuple(run_checks(task.setup.with_inject(task.inject), task.checks, task.context)), task.target,
                       task.shape, task.chunked)


def _plain_row(task: RowTask) -> SelftestRow:
    """The greedy check of the production plain engine (clean, or with a fault its loop hosts); the battery's other
    checks are about drafts and verification of drafts, so they are skipped here (saying so)."""
    return _checks_row(task, plain_setup(task.setup).with_inject(task.inject), ("greedy",),
                       "plain decoding: the greedy check only")


def _checks_row(task: RowTask, setup: CheckSetup, names: tuple[str, ...], why: str) -> SelftestRow:
    """A row of the checks `names` alone on `setup` (the run's others skipped, saying `why`)."""
    ran = dict(zip((n for n in task.checks if n in names),
                   run_checks(setup, tuple(n for n in task.checks if n in names), task.context)))
    results = tuple(ran.get(name) or CheckResult(name, True, why, 0.0, skipped=True) for name in task.checks)
    return SelftestRow(task.method, task.seed, task.inject, results, task.target, task.shape, task.chunked,
                       task.constrained)


def due_faults(chosen: list[Fault], method: str, seed_index: int, clean: SelftestRow,
               done: dict[tuple[str, str, bool, bool, bool], set[str]]) -> list[Fault]:
    """The faults `method` hosts that run at this seed (and are marked done): a phase-hook fault on the first seed of
    its target; a path mutant on the first seed whose clean row took its path (the biased tiny target never reaches
    the fused projections, say), so that a bug on a path this seed's models never take is not counted as missed. A
    path that no seed takes is the coverage table's failure. The window and MoE faults run on the sliding-window +
    MoE target only (inert on the seeds' full-attention dense targets), the hybrid-state faults on the hybrid target
    only (no other target has recurrent state), every other fault on the seeds' targets only; the tree faults on tree
    rows only (inert on chain rounds), every other fault on chain rows only, but for the grammar faults that tree
    rounds host too (catalog.GRAMMAR_TREE_MUTANTS: on the constrained tree rows as well); the chunked prefill faults
    on chunked rows only, every other fault on whole-prompt rows only; the grammar faults on constrained rows only (inert on
    unconstrained requests), every other fault on unconstrained rows only.
    Called per method in task order (`done` carries the earlier tasks' choices per method and target);
    `seed_index` counts the tasks of the clean row's target."""
    taken = frozenset().union(*(r.paths for r in clean.results))
    ran = done.setdefault((method, clean.target, clean.shape.is_tree, clean.chunked, clean.constrained), set())
    due = [f for f in chosen if method in f.methods and f.name not in ran
           and needs_window_moe_target(f.name) == (clean.target == WINDOW_MOE)
           and needs_hybrid_target(f.name) == (clean.target == HYBRID)
           and clean.target != MAMBA2  # its row reaches the Mamba-2 paths; no fault runs there (setups.py)
           and (runs_on_tree_rows(f.name) if clean.shape.is_tree else not needs_tree_shape(f.name))
           and needs_chunked_prefill(f.name) == clean.chunked
           and not (clean.target == HYBRID and f.name in HYBRID_NOT_EXERCISED.get(method, ()))
           and needs_constrained_decoding(f.name) == clean.constrained
           and (f.path in taken if f.path else seed_index == 0)]
    ran.update(f.name for f in due)
    return due


def target_indices(tasks: list[SeedTask]) -> list[int]:
    """Per task, how many tasks of its target come before it (due_faults' `seed_index`)."""
    return [sum(t.target == task.target for t in tasks[:i]) for i, task in enumerate(tasks)]


def _reference(method: str, seed: int, num_steps: int, target: str, shape: DraftShape = CHAIN) -> dict:
    """CheckContext fields of the shipped baseline (absent: the baseline check is skipped, saying why)."""
    baseline = reference_baseline(method, seed, num_steps, target, shape)
    if baseline is None:
        return {"baseline_source": f"no shipped reference baseline for {method} {shape.label()} "
                                   f"{target or 'seed target'} seed "
                                   f"{seed} k={num_steps} (shipped: "
                                   f"seeds {SHIPPED_SEEDS[0]}-{SHIPPED_SEEDS[-1]}, k={SHIPPED_NUM_STEPS})"}
    return {"baseline": baseline, "baseline_source": reference_source()}
