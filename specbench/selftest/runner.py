"""Run the battery against the clean engine and every fault, per method, and build the mutation table.

Per seed: a tiny target, a draft LM perturbed from it (tiny.py), and per speculative method of the proposer
registry its tiny drafter and prompts (drafters.py: EAGLE heads built from the target's weights, n-gram on a
copying variant of the target with prompts that repeat its own output). The greedy reference comes from the
reference engine (check/reference.py), itself checked against HF transformers on each tiny target once per seed
(hf_reference.py).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass

import torch

from specbench.check.battery import CHECKS, CheckContext, run_checks
from specbench.check.greedy import reference_outputs
from specbench.check.result import CheckResult
from specbench.check.engine_defaults import check_engine
from specbench.check.setup import CheckSetup
from specbench.errors import SpecbenchError
from specbench.faults import resolve_fault
from specbench.faults.catalog import SELFTEST_FAULTS
from specbench.selftest.reference_baselines import SHIPPED_SEEDS, SHIPPED_NUM_STEPS, reference_baseline, reference_source
from specbench.selftest.hf_reference import cross_check_reference
from specbench.selftest.drafters import TinyPair, build_method, selftest_methods
from specbench.selftest.tiny import build_tiny_pair

METHODS = selftest_methods()  # every registered speculative method
# KV pool of every selftest engine: the sampled check's 400-request wave (~40 tokens each, 4 KB per 4-token block
# for the target drafting for itself) fits without preempting; engines are built ~450 times, and zeroing a larger
# pool each time was a tenth of the selftest's CPU time.
KV_CACHE_GB = 0.025


@dataclass(frozen=True)
class SelftestRow:
    method: str  # one of METHODS
    seed: int
    inject: str | None  # None = the clean engine
    results: tuple[CheckResult, ...]

    @property
    def detected(self) -> bool:
        return any(not r.passed for r in self.results)


def selftest_setups(root: str, seed: int, methods: tuple[str, ...], num_steps: int,
                    device: str = "cpu") -> dict[str, CheckSetup]:
    """One setup per method on the seed's tiny target (written under root)."""
    unknown = set(methods) - set(METHODS)
    if unknown or not methods:
        raise SpecbenchError(f"selftest methods {', '.join(sorted(unknown)) or '(none)'} unknown; "
                             f"supported: {', '.join(METHODS)}")
    target, draft = build_tiny_pair(f"{root}/{seed}", seed=seed)
    pair = TinyPair(f"{root}/{seed}", seed, target, draft)
    base = check_engine(target=target, seed=seed, device=device, kv_cache_gb=KV_CACHE_GB)  # plain: builds prompts
    setups = {}
    for m in methods:
        models = build_method(m, pair, base)
        setups[m] = CheckSetup(check_engine(target=models.target, method=m, draft=models.draft,
                                            max_num_steps=num_steps, seed=seed, device=device,
                                            kv_cache_gb=KV_CACHE_GB), models.prompts)
    return setups


def run_selftest(
    *, seeds: tuple[int, ...] = (0,), methods: tuple[str, ...] = METHODS, faults: tuple[str, ...] | None = None,
    checks: tuple[str, ...] = CHECKS, num_steps: int = 3, device: str = "cpu", on_row=None,
) -> list[SelftestRow]:
    """Per method: clean rows (one per seed: models and prompts differ), then one row per fault on the first seed.

    The baseline each row is checked against is the shipped reference for the seed and method
    (reference_baselines.py), never a measurement of the engine under test.
    """
    chosen = [resolve_fault(n) for n in (faults if faults is not None else SELFTEST_FAULTS)]  # unknown names fail here
    if not seeds:
        raise SpecbenchError("selftest needs at least one seed")
    if not checks or set(checks) - set(CHECKS):
        raise SpecbenchError(f"selftest checks {', '.join(checks) or '(none)'}: supported: {', '.join(CHECKS)}")
    torch.set_num_threads(1)  # tiny models: thread fork/join costs more than it saves
    rows: list[SelftestRow] = []
    with tempfile.TemporaryDirectory(prefix="specbench-selftest-") as tmp:
        for i, seed in enumerate(seeds):
            setups = selftest_setups(tmp, seed, methods, num_steps, device)
            references: dict[tuple, tuple] = {}  # plain decoding per (target, prompts): shared by methods
            for method, setup in setups.items():
                key = (setup.engine.target, setup.prompts)
                if key not in references:
                    reference = reference_outputs(setup)
                    cross_check = None
                    if "greedy" in checks:  # the reference itself, once per target and seed, against transformers
                        cross_check = cross_check_reference(setup.engine.target, setup.prompts, setup.max_tokens,
                                                            reference)
                    references[key] = (reference, cross_check)
                reference, cross_check = references[key]
                ctx = CheckContext(reference=reference, reference_cross_check=cross_check,
                                   **_reference(method, seed, num_steps))
                hosted = [f.name for f in chosen if method in f.methods]
                for name in [None] + hosted if i == 0 else [None]:
                    results = run_checks(setup.with_inject(name), checks, ctx)
                    rows.append(SelftestRow(method, seed, name, tuple(results)))
                    if on_row is not None:
                        on_row(rows[-1])
    return rows


def _reference(method: str, seed: int, num_steps: int) -> dict:
    """CheckContext fields of the shipped baseline (absent: the baseline check is skipped, saying why)."""
    baseline = reference_baseline(method, seed, num_steps)
    if baseline is None:
        return {"baseline_source": f"no shipped reference baseline for {method} seed {seed} k={num_steps} (shipped: "
                                   f"seeds {SHIPPED_SEEDS[0]}-{SHIPPED_SEEDS[-1]}, k={SHIPPED_NUM_STEPS})"}
    return {"baseline": baseline, "baseline_source": reference_source()}


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
