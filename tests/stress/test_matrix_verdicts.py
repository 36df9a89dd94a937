"""The matrix built from what is known of a server, the verdict rules on hand-made runs, the smallest failing
condition and the report's headline."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.stress.canary import make_canary
from specbench.stress.conditions import Condition, ServerShape, default_matrix
from specbench.stress.outcomes import ConditionRun, DraftCounts, RequestOutcome, SideRun
from specbench.stress.report import StressReport, to_markdown
from specbench.stress.verdict import Verdict, judge, smallest_failing

SHAPE = ServerShape(block_size=16, window=None, chunk_size=None, capture_sizes=(1, 2, 3, 4, 8, 16, 32),
                    max_concurrency=32, max_prompt_tokens=1024, can_restart=False)


def test_the_matrix_lists_what_it_runs_and_why_it_skips_the_rest():
    conditions, not_run = default_matrix(SHAPE)
    names = [c.name for c in conditions]
    assert names[0] == "gentle" and conditions[0].concurrency == 1  # the gate's own condition, to pass beside
    assert "batch-6-off-capture" in names and "saturating-32" in names and "zero-draft-mix-8" in names
    blocks = [c.prompt_tokens for c in conditions if c.name.startswith("block-multiple")]
    assert blocks == [127, 128, 129] and all(c.why for c in conditions)
    assert {n.name for n in not_run} == {"past-window", "past-chunk", "after-restart"}
    assert "--window-tokens" in next(n.why for n in not_run if n.name == "past-window")
    shaped = dataclasses.replace(SHAPE, window=256, chunk_size=2048, can_restart=True)
    conditions, not_run = default_matrix(shaped)
    past = {c.name: c.prompt_tokens for c in conditions}
    assert past["past-window"] > 256 and "after-restart" in past
    assert [n.name for n in not_run] == ["past-chunk"]  # 2048 + a question > the longest prompt (1024)
    powers = dataclasses.replace(SHAPE, capture_sizes=tuple(range(1, 33)))
    assert not any("off-capture" in c.name for c in default_matrix(powers)[0])  # no gap: said, not invented


def _outcomes(n: int, texts: list[str], answered: list[bool]) -> tuple[RequestOutcome, ...]:
    out = []
    for i in range(n):
        canary = make_canary("echo-id", i)
        out.append(RequestOutcome(i, canary, canary.answer if answered[i] else texts[i], (), None))
    return tuple(out)


def _run(condition: Condition, on_answered: list[bool], off_answered: list[bool], *, drafted: int = 40,
         on_texts: list[str] | None = None) -> ConditionRun:
    n = len(on_answered)
    on_texts = on_texts or ["wrong"] * n
    on = SideRun("k=3", 3, _outcomes(n, on_texts, on_answered), DraftCounts(drafted, drafted // 2, "engine"))
    off = SideRun("k=0", 0, _outcomes(n, ["wrong"] * n, off_answered), DraftCounts(0, 0, "engine"))
    return ConditionRun(condition, condition.prompt_tokens, True, off, on, 1.0)


GENTLE = Condition("gentle", "w", 1, 96, 8)
C8 = Condition("concurrency-8", "w", 8, 96, 8)
LONG8 = Condition("long-8", "w", 8, 900, 8)


def test_the_output_rule_fails_on_one_difference_with_an_exact_interval():
    same = judge(_run(GENTLE, [False] * 8, [False] * 8), "output")
    assert same.verdict is Verdict.PASS and same.num_corrupt == 0 and same.interval[1] == pytest.approx(0.3694, 1e-3)
    one = judge(_run(C8, [False] * 8, [False] * 8, on_texts=["other"] + ["wrong"] * 7), "output")
    assert one.verdict is Verdict.FAIL and one.num_corrupt == 1 and one.first_corrupt.startswith("request 0")
    assert 0 < one.interval[0] < 0.125 < one.interval[1] < 1


def test_the_canary_rule_needs_one_sided_canary_failures_and_tolerates_divergence():
    noisy = judge(_run(C8, [False] * 8, [False] * 8, on_texts=["other"] * 8), "canary")
    assert noisy.verdict is Verdict.PASS and noisy.num_diverged == 8  # 16-bit batch noise: outputs differ, canaries
    few = judge(_run(C8, [False, True, True, True, True, True, True, True], [True] * 8), "canary")
    assert few.verdict is Verdict.SUSPECT and few.mcnemar_p == 1.0
    many = judge(_run(Condition("c8", "w", 8, 96, 12), [False] * 7 + [True] * 5, [True] * 12), "canary")
    assert many.verdict is Verdict.FAIL and many.mcnemar_p < 0.05 and many.num_only_on_fails == 7


def test_nothing_drafted_anywhere_with_speculation_on_is_speculation_silently_off():
    none = judge(_run(GENTLE, [True] * 8, [True] * 8, drafted=0), "output")
    assert none.verdict is Verdict.NO_DRAFTS and not none.is_failure  # an n-gram drafter may find no match here
    some = judge(_run(C8, [True] * 8, [True] * 8), "output")
    assert StressReport("e", "output", (none, some), (), 1.0).exit_code == 0
    off = StressReport("e", "output", (none, judge(_run(C8, [True] * 8, [True] * 8, drafted=0), "output")), (), 1.0)
    assert off.exit_code == 1 and off.headline().startswith("FAIL: nothing drafted in any of 2 conditions")


def test_the_smallest_failing_condition_leads_the_report():
    verdicts = [judge(_run(GENTLE, [False] * 8, [False] * 8), "output"),
                judge(_run(C8, [False] * 8, [False] * 8, on_texts=["x"] * 8), "output"),
                judge(_run(LONG8, [False] * 8, [False] * 8, on_texts=["x"] * 8), "output")]
    assert [v.condition.name for v in smallest_failing(verdicts)] == ["concurrency-8"]  # long-8 lies above it
    report = StressReport("embedded engine, k=3", "output", tuple(verdicts), (), 3.0)
    text = to_markdown(report)
    assert text.startswith("## specbench stress: FAIL: FAIL at concurrency-8 (concurrency 8, prompts of 96 tokens); "
                           "passes at gentle (concurrency 1, prompts of 96 tokens)")
    assert report.exit_code == 1 and "| gentle (c=1) | PASS |" in text
    clean = StressReport("e", "output", (verdicts[0],), (), 1.0)
    assert clean.exit_code == 0 and to_markdown(clean).startswith("## specbench stress: PASS")
