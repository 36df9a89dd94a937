"""Check 5, acceptance baseline: per-position greedy acceptance vs a stored baseline for the same pair and k."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specbench.check.greedy import greedy_params
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.errors import SpecbenchError

DEFAULT_TOLERANCE = 0.05  # absolute drop in acceptance rate allowed per position


@dataclass(frozen=True)
class AcceptanceBaseline:
    target: str
    draft: str | None
    method: str
    num_steps: int
    num_prompts: int
    max_tokens: int
    acceptance_per_pos: tuple[float, ...]  # [num_steps] accepted / drafted at each draft position


def measure_acceptance(setup: CheckSetup) -> AcceptanceBaseline:
    outs = build_llm(setup).generate(prompt_list(setup), greedy_params(setup))
    rates = []
    for i in range(setup.num_steps):
        drafted = sum(o.stats.num_drafted_per_pos[i] for o in outs)
        rates.append(sum(o.stats.num_accepted_per_pos[i] for o in outs) / max(drafted, 1))
    return AcceptanceBaseline(setup.target, setup.draft, setup.method, setup.num_steps, len(outs), setup.max_tokens,
                              tuple(rates))


def save_baseline(baseline: AcceptanceBaseline, path: str | Path) -> None:
    Path(path).write_text(json.dumps(asdict(baseline), indent=2))


def load_baseline(path: str | Path) -> AcceptanceBaseline:
    try:
        raw = json.loads(Path(path).read_text())
        raw["acceptance_per_pos"] = tuple(raw["acceptance_per_pos"])
        return AcceptanceBaseline(**raw)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise SpecbenchError(f"cannot read acceptance baseline {path}: {exc}") from None


def check_baseline(setup: CheckSetup, baseline: AcceptanceBaseline, tolerance: float = DEFAULT_TOLERANCE) -> CheckResult:
    start = time.perf_counter()
    if (baseline.method, baseline.num_steps) != (setup.method, setup.num_steps):
        raise SpecbenchError(f"baseline is for method {baseline.method} k={baseline.num_steps}, "
                             f"not {setup.method} k={setup.num_steps}")
    now = measure_acceptance(setup)
    drops = [(i + 1, b, n) for i, (b, n) in enumerate(zip(baseline.acceptance_per_pos, now.acceptance_per_pos))
             if b - n > tolerance]
    shown = " ".join(f"{r:.3f}" for r in now.acceptance_per_pos)
    detail = f"acceptance per position {shown} vs baseline (tolerance {tolerance})"
    if drops:
        detail += "; dropped at " + ", ".join(f"pos {p}: {b:.3f} -> {n:.3f}" for p, b, n in drops)
    return CheckResult("baseline", not drops, detail, time.perf_counter() - start)
