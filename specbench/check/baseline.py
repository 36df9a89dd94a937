"""Check 5, acceptance baseline: per-position greedy acceptance vs a stored baseline for the same pair and k.

The verdict is statistical: at each draft position, a one-sided Fisher exact test of "acceptance now is lower than
in the baseline" on the accepted / drafted counts of both runs, Bonferroni over the positions. A drop is flagged
when it is larger than what the number of drafts can explain, so a 0.05 drop on 40 drafts is noise and a 0.05
drop on 4000 is a regression; the detail states, per position, the smallest drop the test detects with power 0.8.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specbench.check.acceptance_test import PositionTest, position_tests
from specbench.check.greedy import greedy_params
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.errors import SpecbenchError

BASELINE_ALPHA = 0.01  # family-wise false-alarm rate over the positions of one check


@dataclass(frozen=True)
class AcceptanceBaseline:
    target: str
    draft: str | None
    method: str
    num_steps: int
    num_prompts: int
    max_tokens: int
    num_drafted_per_pos: tuple[int, ...]  # [num_steps] rounds that drafted position i + 1
    num_accepted_per_pos: tuple[int, ...]  # [num_steps] of those, rounds that accepted it

    @property
    def acceptance_per_pos(self) -> tuple[float, ...]:  # [num_steps] accepted / drafted
        return tuple(a / max(d, 1) for a, d in zip(self.num_accepted_per_pos, self.num_drafted_per_pos))


def measure_acceptance(setup: CheckSetup) -> AcceptanceBaseline:
    outs = build_llm(setup).generate(prompt_list(setup), greedy_params(setup))
    engine = setup.engine
    drafted = tuple(sum(o.stats.num_drafted_per_pos[i] for o in outs) for i in range(engine.max_num_steps))
    accepted = tuple(sum(o.stats.num_accepted_per_pos[i] for o in outs) for i in range(engine.max_num_steps))
    return AcceptanceBaseline(engine.target, engine.draft, engine.method, engine.max_num_steps, len(outs),
                              setup.max_tokens, drafted, accepted)


def baseline_to_json(baseline: AcceptanceBaseline) -> dict:
    return {**asdict(baseline), "acceptance_per_pos": list(baseline.acceptance_per_pos)}  # rates: for readers


def baseline_from_json(raw: dict) -> AcceptanceBaseline:
    fields = dict(raw)
    fields.pop("acceptance_per_pos", None)  # derived from the counts
    for name in ("num_drafted_per_pos", "num_accepted_per_pos"):
        fields[name] = tuple(int(x) for x in fields[name])
    return AcceptanceBaseline(**fields)


def save_baseline(baseline: AcceptanceBaseline, path: str | Path) -> None:
    Path(path).write_text(json.dumps(baseline_to_json(baseline), indent=2))


def load_baseline(path: str | Path) -> AcceptanceBaseline:
    try:
        return baseline_from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise SpecbenchError(f"cannot read acceptance baseline {path} (files without per-position counts need "
                             f"regenerating with --save-baseline): {exc}") from None


def compare_acceptance(baseline: AcceptanceBaseline, now: AcceptanceBaseline,
                       alpha: float = BASELINE_ALPHA) -> tuple[bool, str]:
    """(passed, one-line detail) of the per-position test of `now` against `baseline`."""
    tests = position_tests(baseline.num_accepted_per_pos, baseline.num_drafted_per_pos,
                           now.num_accepted_per_pos, now.num_drafted_per_pos, alpha)
    shown = " ".join(f"{r:.3f}" for r in now.acceptance_per_pos)
    base = " ".join(f"{r:.3f}" for r in baseline.acceptance_per_pos)
    mdd = " ".join(f"{t.detectable_drop:.2f}" for t in tests)
    detail = (f"acceptance per position {shown} vs baseline {base} (drafts {'/'.join(map(str, now.num_drafted_per_pos))}"
              f"; one-sided Fisher per position, alpha {alpha:g} over {len(tests)}; detectable drop {mdd})")
    drops = [t for t in tests if t.is_drop]
    if drops:
        detail += "; dropped at " + ", ".join(_drop(t) for t in drops)
    return not drops, detail


def _drop(t: PositionTest) -> str:
    return f"pos {t.position}: {t.baseline_rate:.3f} -> {t.rate:.3f} (p {t.p_value:.2g})"


def check_baseline(setup: CheckSetup, baseline: AcceptanceBaseline, alpha: float = BASELINE_ALPHA,
                   source: str = "") -> CheckResult:
    start = time.perf_counter()
    if (baseline.method, baseline.num_steps) != (setup.engine.method, setup.engine.max_num_steps):
        raise SpecbenchError(f"baseline is for method {baseline.method} k={baseline.num_steps}, "
                             f"not {setup.engine.method} k={setup.engine.max_num_steps}")
    now = measure_acceptance(setup)
    if (baseline.num_prompts, baseline.max_tokens) != (now.num_prompts, now.max_tokens):
        raise SpecbenchError(f"baseline was measured on {baseline.num_prompts} prompts x {baseline.max_tokens} tokens, "
                             f"this run uses {now.num_prompts} x {now.max_tokens}: use the same --budget and --max-tokens")
    passed, detail = compare_acceptance(baseline, now, alpha)
    return CheckResult("baseline", passed, (f"{source}: " if source else "") + detail, time.perf_counter() - start)
