"""Judge each condition: corruption with speculation on against the same prompts with it off, an exact interval on
its rate, McNemar on the canaries, and whether speculation happened at all; then the smallest failing condition.

Two rules, chosen by what the engine promises (`JUDGES`):
- "output": a deterministic engine (the embedded one; specbench serve in fp32): greedy output with speculation on
  must equal speculation off, request by request; one difference is corruption.
- "canary": a 16-bit server whose batches change its numerics: outputs may differ in the last bits without a bug,
  canaries may not: a condition fails when canaries fail with speculation on and pass with it off significantly
  more often than the reverse (McNemar exact, one request = one pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from specbench.stress.conditions import Condition
from specbench.stress.exact_tests import clopper_pearson, mcnemar_exact
from specbench.stress.outcomes import ConditionRun, RequestOutcome

JUDGES = ("output", "canary")
MCNEMAR_ALPHA = 0.05


class Verdict(Enum):
    PASS = "PASS"
    FAIL = "FAIL"  # corrupted
    # speculation on, yet nothing drafted here: an n-gram drafter may find no match on some prompts, so one such
    # condition is shown, not failed; nothing drafted in any condition is speculation silently off (report.py)
    NO_DRAFTS = "NO-DRAFTS"
    # outputs fine, but the prefix cache served nothing with speculation on where it did with it off (vLLM #54360:
    # hits 0 for hybrids with speculation on): speculation disabling caching is a bug, failed as one
    NO_CACHE_HITS = "NO-CACHE-HITS"
    SUSPECT = "SUSPECT"  # canary rule: on-only failures, not significant
    ERRORS = "ERRORS"  # requests failed on both sides alike: nothing to compare


@dataclass(frozen=True, slots=True)
class ConditionVerdict:
    run: ConditionRun
    verdict: Verdict
    num_requests: int
    num_corrupt: int  # judged corrupt by the rule
    interval: tuple[float, float]  # 95% Clopper-Pearson of num_corrupt / num_requests
    num_only_on_fails: int  # canaries failed with speculation on, passed off
    num_only_off_fails: int
    mcnemar_p: float
    num_diverged: int  # outputs that differ on vs off (both rules count it; only "output" judges by it)
    first_corrupt: str | None  # one example, for the report

    @property
    def condition(self) -> Condition:
        return self.run.condition

    @property
    def is_failure(self) -> bool:
        return self.verdict in (Verdict.FAIL, Verdict.NO_CACHE_HITS)


def _differs(on: RequestOutcome, off: RequestOutcome) -> bool:
    if on.error is not None or off.error is not None:
        return (on.error is None) != (off.error is None)
    if on.token_ids and off.token_ids:
        return on.token_ids != off.token_ids
    return on.text != off.text


def judge(run: ConditionRun, rule: str) -> ConditionVerdict:
    if rule not in JUDGES:
        raise ValueError(f"unknown stress rule {rule!r}; known: {', '.join(JUDGES)}")
    pairs = list(zip(run.on.outcomes, run.off.outcomes))
    diverged = [(on, off) for on, off in pairs if _differs(on, off)]
    only_on = [(on, off) for on, off in pairs if off.is_answered and not on.is_answered]
    only_off = [(on, off) for on, off in pairs if on.is_answered and not off.is_answered]
    p = mcnemar_exact(len(only_on), len(only_off))
    corrupt = diverged if rule == "output" else only_on
    n = len(pairs)
    both_failed = sum(1 for on, off in pairs if on.error is not None and off.error is not None)
    if run.on.num_steps > 0 and run.on.drafts.num_draft_tokens == 0:
        verdict = Verdict.NO_DRAFTS
    elif rule == "output":
        verdict = Verdict.FAIL if corrupt else Verdict.PASS
    elif only_on and len(only_on) > len(only_off) and p < MCNEMAR_ALPHA:
        verdict = Verdict.FAIL
    else:
        verdict = Verdict.SUSPECT if len(only_on) > len(only_off) else Verdict.PASS
    if verdict is Verdict.PASS and n and both_failed == n:
        verdict = Verdict.ERRORS
    if verdict in (Verdict.PASS, Verdict.SUSPECT) and _cache_lost(run):
        verdict = Verdict.NO_CACHE_HITS
    example = None
    if corrupt:
        on, off = corrupt[0]
        example = (f"request {on.index} ({on.canary.kind}): with speculation {_show(on)}, without {_show(off)}; "
                   f"answer {on.canary.answer!r}")
    return ConditionVerdict(run, verdict, n, len(corrupt), clopper_pearson(len(corrupt), n), len(only_on),
                            len(only_off), p, len(diverged), example)


def _cache_lost(run: ConditionRun) -> bool:
    """A cache condition whose judged pass hit the prefix cache with speculation off and never with it on."""
    on, off = run.on.prefix_hit_rate, run.off.prefix_hit_rate
    return run.condition.cache != "cold" and on is not None and off is not None and off > 0 and on == 0


def _show(outcome: RequestOutcome) -> str:
    if outcome.error is not None:
        return f"error {outcome.error[:60]!r}"
    return repr(outcome.text[:60])


def smallest_failing(verdicts: list[ConditionVerdict]) -> list[ConditionVerdict]:
    """The failing conditions no gentler failing condition lies below (gentler or equal in every factor)."""
    failing = [v for v in verdicts if v.is_failure]

    def below(a: int, b: int) -> bool:  # indices into failing; equal sizes: the earlier one is below
        x, y = failing[a].condition.size, failing[b].condition.size
        return a != b and all(p <= q for p, q in zip(x, y)) and (x != y or a < b)

    return [v for i, v in enumerate(failing) if not any(below(j, i) for j in range(len(failing)))]


def explain(failing: ConditionVerdict, verdicts: list[ConditionVerdict]) -> str:
    """"fails at <condition>; passes at <the gentlest passing condition below it>", for the report's headline."""
    c = failing.condition
    passing = [v.condition for v in verdicts if v.verdict is Verdict.PASS
               and all(x <= y for x, y in zip(v.condition.size, c.size))]
    text = f"{failing.verdict.value} at {c.name} ({c.describe()})"
    if passing:
        best = max(passing, key=lambda p: p.size)
        text += f"; passes at {best.name} ({best.describe()})"
    return text
