"""The stress report: the headline first (PASS, or the smallest failing condition and the gentlest passing one
below it), then one row per condition with why it is there, then the conditions that could not run and why."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import ExitStatus
from specbench.stress.conditions import NotRun
from specbench.stress.verdict import ConditionVerdict, Verdict, explain, smallest_failing


@dataclass(frozen=True)
class StressReport:
    title: str  # what was stressed: engine or server, k, the rule
    rule: str  # verdict.JUDGES
    verdicts: tuple[ConditionVerdict, ...]
    not_run: tuple[NotRun, ...]
    seconds: float

    @property
    def failing(self) -> list[ConditionVerdict]:
        return [v for v in self.verdicts if v.is_failure]

    @property
    def is_speculation_off(self) -> bool:
        """Nothing drafted in any condition with speculation on, where the counts are known."""
        return bool(self.verdicts) and all(v.verdict is Verdict.NO_DRAFTS for v in self.verdicts)

    @property
    def exit_code(self) -> int:
        return ExitStatus.FAILED if self.failing or self.is_speculation_off else ExitStatus.PASSED

    def headline(self) -> str:
        if self.is_speculation_off:
            k = self.verdicts[0].run.on.num_steps
            return (f"FAIL: nothing drafted in any of {len(self.verdicts)} conditions with speculation on (k={k}): "
                    "speculation silently off")
        if not self.failing:
            return f"PASS: no corruption in {len(self.verdicts)} conditions"
        smallest = smallest_failing(list(self.verdicts))
        return "FAIL: " + "; ".join(explain(v, list(self.verdicts)) for v in smallest)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _drafts(v: ConditionVerdict) -> str:
    d = v.run.on.drafts
    if d.num_draft_tokens is None:
        return "unknown"
    rate = f" ({_pct(d.num_accepted_tokens / d.num_draft_tokens)} accepted)" if d.num_draft_tokens else ""
    return f"{d.num_draft_tokens}{rate}"


def _hits(v: ConditionVerdict) -> str:
    """Prefix-cache hit rates of the judged pass, speculation on / off ("-": nothing says, or no lookups)."""
    rates = (v.run.on.prefix_hit_rate, v.run.off.prefix_hit_rate)
    return " / ".join("-" if r is None else _pct(r) for r in rates)


def to_markdown(report: StressReport) -> str:
    lines = [f"## specbench stress: {report.headline()}", "", f"{report.title}; rule: {report.rule}; "
             f"{report.seconds:.0f} s", "",
             "| condition | verdict | prompt tokens | requests | corrupt (95% CI) | canaries failed on / off only "
             "| McNemar p | outputs differ | drafted at k | prefix hits on / off | why |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in report.verdicts:
        c, run = v.condition, v.run
        low, high = v.interval
        length = str(run.num_prompt_tokens) if run.is_exact_length else f"~{run.num_prompt_tokens}"
        lines.append(f"| {c.name} (c={c.concurrency}{', ' + c.cache if c.cache != 'cold' else ''}) | "
                     f"{v.verdict.value} | {length} | {v.num_requests} | {v.num_corrupt} "
                     f"[{_pct(low)}, {_pct(high)}] | {v.num_only_on_fails} / {v.num_only_off_fails} | "
                     f"{v.mcnemar_p:.3g} | {v.num_diverged} | {_drafts(v)} | {_hits(v)} | {c.why} |")
    examples = [v for v in report.verdicts if v.first_corrupt]
    if examples:
        lines += ["", "first corrupt request per failing condition:"]
        lines += [f"- {v.condition.name}: {v.first_corrupt}" for v in examples]
    if report.not_run:
        lines += ["", "not run:"] + [f"- {n.name}: {n.why}" for n in report.not_run]
    return "\n".join(lines) + "\n"
