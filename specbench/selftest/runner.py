"""Run the battery against the clean engine and every fault, per method, and build the mutation table.

Per seed: a tiny target (tiny.py: biased, no-bias tied Llama or Qwen3 q/k norm, by seed), a draft LM perturbed from
it, and per speculative method of the proposer registry its tiny drafter and prompts (drafters.py: EAGLE heads built
from the target's weights, n-gram on a copying variant of the target with prompts that repeat its own output). Per
seed also one row for the production plain engine (method none, overlapped decoding): the greedy check against the
reference. The greedy reference comes from the reference engine (check/reference.py), itself checked against HF
transformers on each tiny target once per seed (hf_reference.py). Every check reports the execution paths its
engines under test took (execution_paths.py); selftest/coverage.py turns the clean rows into the coverage table.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import torch

from specbench.check.battery import CHECKS, CheckContext, run_checks
from specbench.check.budget import BUDGETS, Budget
from specbench.check.greedy import reference_outputs
from specbench.check.result import CheckResult
from specbench.check.engine_defaults import check_engine
from specbench.engine.builder import resolve_device
from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError
from specbench.faults import resolve_fault
from specbench.faults.fault import Fault
from specbench.faults.catalog import selftest_faults
from specbench.execution_paths import device_class
from specbench.selftest.coverage import PathCoverage, path_coverage
from specbench.selftest.reference_baselines import SHIPPED_SEEDS, SHIPPED_NUM_STEPS, reference_baseline, reference_source
from specbench.selftest.hf_reference import cross_check_reference
from specbench.selftest.drafters import TinyPair, build_method, selftest_methods
from specbench.selftest.tiny import build_tiny_pair, variant_for_seed

METHODS = selftest_methods()  # every registered speculative method
PLAIN = "none"  # the method of the production plain engine's row
# KV pool of every selftest engine: the sampled check's 400-request wave (~40 tokens each, 4 KB per 4-token block
# for the target drafting for itself) fits without preempting; engines are built ~450 times, and zeroing a larger
# pool each time was a tenth of the selftest's CPU time.
KV_CACHE_GB = 0.025


@dataclass(frozen=True)
class SelftestRow:
    method: str  # one of METHODS, or PLAIN
    seed: int
    inject: str | None  # None = the clean engine
    results: tuple[CheckResult, ...]

    @property
    def detected(self) -> bool:
        return any(not r.passed for r in self.results)


def selftest_setups(root: str, seed: int, methods: tuple[str, ...], num_steps: int,
                    device: str = "cpu", engine_options: dict | None = None) -> dict[str, CheckSetup]:
    """One setup per method on the seed's tiny target (written under root; its variant, tiny.py, cycles with the
    seed so that the default seeds reach the biased and the fused layer paths). `engine_options`: EngineConfig fields
    over the check defaults (e.g. the Triton attention and verifier for a CPU run of CUDA's paths)."""
    unknown = set(methods) - set(METHODS)
    if unknown or not methods:
        raise SpecbenchError(f"selftest methods {', '.join(sorted(unknown)) or '(none)'} unknown; "
                             f"supported: {', '.join(METHODS)}")
    target, draft = build_tiny_pair(f"{root}/{seed}", seed=seed, variant=variant_for_seed(seed))
    pair = TinyPair(f"{root}/{seed}", seed, target, draft)
    options = {"seed": seed, "device": device, "kv_cache_gb": KV_CACHE_GB, **(engine_options or {})}
    base = check_engine(target=target, **options)  # plain: builds prompts
    setups = {}
    for m in methods:
        models = build_method(m, pair, base)
        setups[m] = CheckSetup(check_engine(target=models.target, method=m, draft=models.draft,
                                            max_num_steps=num_steps, **options), models.prompts)
    return setups


def plain_setup(setup: CheckSetup) -> CheckSetup:
    """The production plain engine on a speculative setup's target and prompts."""
    return setup.with_engine(method=PLAIN, draft=None, max_num_steps=0).with_inject(None)


def _plain_row(setup: CheckSetup, seed: int, checks: tuple[str, ...], ctx: CheckContext,
               inject: str | None = None) -> SelftestRow:
    """The greedy check of the production plain engine (clean, or with a fault its loop hosts); the battery's other
    checks are about drafts and verification of drafts, so they are skipped here (saying so)."""
    plain = plain_setup(setup).with_inject(inject)
    greedy = run_checks(plain, ("greedy",), ctx) if "greedy" in checks else []
    results = tuple(greedy[0] if name == "greedy" else
                    CheckResult(name, True, "plain decoding: the greedy check only", 0.0, skipped=True)
                    for name in checks)
    return SelftestRow(PLAIN, seed, inject, results)


def run_selftest(
    *, seeds: tuple[int, ...] = (0,), methods: tuple[str, ...] = METHODS, faults: tuple[str, ...] | None = None,
    checks: tuple[str, ...] = CHECKS, num_steps: int = 3, device: str = "cpu", on_row=None,
    engine_options: dict | None = None, budget: Budget = BUDGETS["full"],
) -> list[SelftestRow]:
    """Per seed: the plain row, then per method a clean row (models and prompts differ per seed) and one row per fault
    due there (_due: the first seed, or a path mutant's first seed whose clean row took its path).

    The baseline each row is checked against is the shipped reference for the seed and method
    (reference_baselines.py), never a measurement of the engine under test. `budget` trims the battery (check/budget.py;
    tests reach paths under the Triton interpreter with a small one).
    """
    if faults is None:  # the device's default: path mutants only where their path is production
        faults = selftest_faults(device_class(resolve_device(device).type))
    chosen = [resolve_fault(n) for n in faults]  # unknown names fail here
    if not seeds:
        raise SpecbenchError("selftest needs at least one seed")
    if not checks or set(checks) - set(CHECKS):
        raise SpecbenchError(f"selftest checks {', '.join(checks) or '(none)'}: supported: {', '.join(CHECKS)}")
    torch.set_num_threads(1)  # tiny models: thread fork/join costs more than it saves
    rows: list[SelftestRow] = []
    done: dict[str, set[str]] = {}  # method -> faults already run
    with tempfile.TemporaryDirectory(prefix="specbench-selftest-") as tmp:
        for i, seed in enumerate(seeds):
            setups = selftest_setups(tmp, seed, methods, num_steps, device, engine_options)
            references: dict[tuple, tuple] = {}  # plain decoding per (target, prompts): shared by methods
            for method, setup in setups.items():
                key = (setup.engine.target, setup.prompts)
                if key not in references:
                    reference = reference_outputs(budget.apply(setup))
                    cross_check = None
                    if "greedy" in checks:  # the reference itself, once per target and seed, against transformers
                        cross_check = cross_check_reference(setup.engine.target, setup.prompts,
                                                            budget.apply(setup).max_tokens, reference)
                    references[key] = (reference, cross_check)
                    if len(references) == 1:  # the plain rows: once per seed, on its first target
                        plain_ctx = CheckContext(reference=reference, reference_cross_check=cross_check, budget=budget)
                        clean = _plain_row(setup, seed, checks, plain_ctx)
                        for row in [clean] + [_plain_row(setup, seed, checks, plain_ctx, f.name) for f in
                                              _due(chosen, PLAIN, i, clean, done)]:
                            rows.append(row)
                            if on_row is not None:
                                on_row(row)
                reference, cross_check = references[key]
                ctx = CheckContext(reference=reference, reference_cross_check=cross_check, budget=budget,
                                   **_reference(method, seed, num_steps))
                clean = SelftestRow(method, seed, None, tuple(run_checks(setup, checks, ctx)))
                rows.append(clean)
                if on_row is not None:
                    on_row(clean)
                for fault in _due(chosen, method, i, clean, done):
                    rows.append(SelftestRow(method, seed, fault.name,
                                            tuple(run_checks(setup.with_inject(fault.name), checks, ctx))))
                    if on_row is not None:
                        on_row(rows[-1])
    return rows


def _due(chosen: list[Fault], method: str, seed_index: int, clean: SelftestRow,
         done: dict[str, set[str]]) -> list[Fault]:
    """The faults `method` hosts that run at this seed (and are marked done): a phase-hook fault on the first seed; a
    path mutant on the first seed whose clean row took its path (the biased tiny target never reaches the fused
    projections, say), so that a bug on a path this seed's models never take is not counted as missed. A path that
    no seed takes is the coverage table's failure."""
    taken = frozenset().union(*(r.paths for r in clean.results))
    ran = done.setdefault(method, set())
    due = [f for f in chosen if method in f.methods and f.name not in ran
           and (f.path in taken if f.path else seed_index == 0)]
    ran.update(f.name for f in due)
    return due


def _reference(method: str, seed: int, num_steps: int) -> dict:
    """CheckContext fields of the shipped baseline (absent: the baseline check is skipped, saying why)."""
    baseline = reference_baseline(method, seed, num_steps)
    if baseline is None:
        return {"baseline_source": f"no shipped reference baseline for {method} seed {seed} k={num_steps} (shipped: "
                                   f"seeds {SHIPPED_SEEDS[0]}-{SHIPPED_SEEDS[-1]}, k={SHIPPED_NUM_STEPS})"}
    return {"baseline": baseline, "baseline_source": reference_source()}


def selftest_coverage(rows: list[SelftestRow], device: str = "cpu", checks: tuple[str, ...] = CHECKS) -> PathCoverage:
    """Path x check coverage of the clean rows on `device` (cpu | cuda | auto | cuda:N)."""
    return path_coverage([(row.method, row.results) for row in rows if row.inject is None],
                         device_class(resolve_device(device).type), checks)


def _cell(r: CheckResult) -> str:
    mark = "skip" if r.skipped else ("CRASHED" if r.is_crashed else "DETECTED" if not r.passed else "pass")
    return " ".join(x for x in (mark, r.note, f"{r.seconds:.1f}s") if x)


def format_mutation_table(rows: list[SelftestRow], checks: tuple[str, ...] = CHECKS) -> str:
    widths = [max([len(c)] + [len(_cell(r)) for row in rows for r in row.results if r.name == c]) + 2 for c in checks]
    head = f"{'method':<7}{'seed':>5}  {'engine':<28}" + "".join(f"{c:>{w}}" for c, w in zip(checks, widths))
    lines = [head + "   verdict", "-" * (len(head) + 12)]
    for row in rows:
        cells = "".join(f"{_cell(r):>{w}}" for r, w in zip(row.results, widths))
        if row.inject is None:
            verdict = "ok" if not row.detected else "FALSE ALARM"
        else:
            verdict = "detected" if row.detected else "MISSED"
        lines.append(f"{row.method:<7}{row.seed:>5}  {row.inject or 'clean':<28}{cells}   {verdict}")
    return "\n".join(lines)


def selftest_ok(rows: list[SelftestRow]) -> bool:
    return all((row.inject is None) != row.detected for row in rows)


def timed_selftest(**kwargs) -> tuple[list[SelftestRow], float]:
    start = time.perf_counter()
    rows = run_selftest(**kwargs)
    return rows, time.perf_counter() - start
