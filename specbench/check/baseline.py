"""Check 5, acceptance baseline: per-position greedy acceptance vs a stored baseline for the same pair and k.

The verdict is statistical: at each draft position, a one-sided Fisher exact test of "acceptance now is lower than
in the baseline" on the accepted / drafted counts of both runs, Bonferroni over the positions. A drop is flagged
when it is larger than what the number of drafts can explain, so a 0.05 drop on 40 drafts is noise and a 0.05
drop on 4000 is a regression; the detail states, per position, the smallest drop the test detects with power 0.8.

Acceptance per drafted position cannot see a drafter that drafts less (stops drafting after a while, or proposes
fewer tokens per round): its remaining drafts are accepted as often as before. So the check also compares drafting
per round: at each position, the fraction of verify rounds (every round after a request's first token) that drafted
it, by the same one-sided Fisher test ("drafted less often than in the baseline"), Bonferroni over the positions at
DRAFTING_ALPHA. Mean drafts per round is the sum of those fractions. The check's family-wise false-alarm rate is at
most BASELINE_ALPHA + DRAFTING_ALPHA.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specbench.check.acceptance_drop import PositionTest, position_tests
from specbench.check.greedy import greedy_params
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.errors import SpecbenchError

BASELINE_ALPHA = 0.01  # family-wise false-alarm rate of the acceptance tests over the positions
DRAFTING_ALPHA = 0.01  # family-wise false-alarm rate of the drafting-per-round tests over the positions


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
    num_rounds: int  # verify rounds: every request's emissions after its first token

    @property
    def acceptance_per_pos(self) -> tuple[float, ...]:  # [num_steps] accepted / drafted
        return tuple(a / max(d, 1) for a, d in zip(self.num_accepted_per_pos, self.num_drafted_per_pos))

    @property
    def drafting_per_pos(self) -> tuple[float, ...]:  # [num_steps] rounds that drafted position i + 1 / rounds
        return tuple(d / max(self.num_rounds, 1) for d in self.num_drafted_per_pos)

    @property
    def drafts_per_round(self) -> float:  # mean draft tokens per verify round
        return sum(self.num_drafted_per_pos) / max(self.num_rounds, 1)


def measure_acceptance(setup: CheckSetup) -> AcceptanceBaseline:
    outs = build_llm(setup).generate(prompt_list(setup), greedy_params(setup))
    engine = setup.engine
    drafted = tuple(sum(o.stats.num_drafted_per_pos[i] for o in outs) for i in range(engine.max_num_steps))
    accepted = tuple(sum(o.stats.num_accepted_per_pos[i] for o in outs) for i in range(engine.max_num_steps))
    rounds = sum(len(o.stats.emission_times) - 1 for o in outs)
    return AcceptanceBaseline(engine.target, engine.draft, engine.method, engine.max_num_steps, len(outs),
                              setup.max_tokens, drafted, accepted, rounds)


def baseline_to_json(baseline: AcceptanceBaseline) -> dict:
    return {**asdict(baseline), "acceptance_per_pos": list(baseline.acceptance_per_pos),  # rates: for readers
            "drafts_per_round": baseline.drafts_per_round}


def baseline_from_json(raw: dict) -> AcceptanceBaseline:
    fields = dict(raw)
    fields.pop("acceptance_per_pos", None)  # derived from the counts
    fields.pop("drafts_per_round", None)
    for name in ("num_drafted_per_pos", "num_accepted_per_pos"):
        fields[name] = tuple(int(x) for x in fields[name])
    return AcceptanceBaseline(**fields)


def save_baseline(baseline: AcceptanceBaseline, path: str | Path) -> None:
    Path(path).write_text(json.dumps(baseline_to_json(baseline), indent=2))


def load_baseline(path: str | Path) -> AcceptanceBaseline:
    try:
        return baseline_from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise SpecbenchError(f"cannot read acceptance baseline {path} (files without per-position counts or "
                             f"num_rounds need regenerating with --save-baseline): {exc}") from None


def compare_acceptance(baseline: AcceptanceBaseline, now: AcceptanceBaseline,
                       alpha: float = BASELINE_ALPHA, drafting_alpha: float = DRAFTING_ALPHA) -> tuple[bool, str]:
    """(passed, one-line detail) of the per-position tests of `now` against `baseline`: acceptance, then drafting."""
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
    drafting = position_tests(baseline.num_drafted_per_pos, (baseline.num_rounds,) * baseline.num_steps,
                              now.num_drafted_per_pos, (now.num_rounds,) * now.num_steps, drafting_alpha)
    detail += (f"; drafts per round {now.drafts_per_round:.2f} vs baseline {baseline.drafts_per_round:.2f} "
               f"({now.num_rounds} rounds; share of rounds drafting each position, one-sided Fisher, alpha "
               f"{drafting_alpha:g} over {len(drafting)}; detectable drop "
               f"{' '.join(f'{t.detectable_drop:.2f}' for t in drafting)})")
    fewer = [t for t in drafting if t.is_drop]
    if fewer:
        detail += "; drafted less at " + ", ".join(_drop(t) for t in fewer)
    return not drops and not fewer, detail


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
