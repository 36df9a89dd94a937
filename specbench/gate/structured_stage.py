"""Stage `structured` (opt-in: `--stages ...,structured`): the JSON workload's schema-constrained answers with
speculation on and off; fails when speculation makes answers invalid or non-conformant (every miss on a completed
answer counts; McNemar's exact test over the pairs, each side's rate with its 95% interval), on any HTTP 5xx, or when
a completed answer on either side breaks its schema. A running server (--base-url) has no off side: on alone.
A reasoning model's answer is judged after its reasoning: what a server sent as `reasoning_content` is left out, and
with --reasoning-parser think an inline `<think>...</think>` is cut off first (gate/structured_run.py: judged_text)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from specbench.backends.reasoning import THINK_END
from specbench.gate.stage import StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions, tolerance

STRUCTURED = "structured"
MCNEMAR_ALPHA = 0.05


@dataclass(frozen=True)
class StructuredOptions(StageOptions):
    structured_max_tokens: int = tolerance(256, "structured: max tokens per JSON answer", ok=lambda v: v >= 1)
    structured_limit: int = tolerance(0, "structured: JSON workload cases to run (0: all 32)", ok=lambda v: v >= 0)


class StructuredStage:
    name = STRUCTURED
    options = StructuredOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        from specbench.gate.structured_run import COMPLETE_FINISH, run_structured
        from specbench.metrics.proportion import wilson_interval
        from specbench.stress.exact_tests import mcnemar_exact

        t = inputs.options(StructuredOptions)
        rule = ("completed answers conform to their schema and cut ones are valid prefixes, on both sides; no HTTP "
                f"5xx; speculation on fails no more pairs than off (McNemar p >= {MCNEMAR_ALPHA})")
        run = run_structured(inputs.sweep, inputs.num_steps, max_tokens=t.structured_max_tokens,
                             limit=t.structured_limit or None, fault=inputs.fault)
        on, off = run.on, run.off
        n = len(on.answers)

        def rate(side) -> str:
            low, high = wilson_interval(side.num_ok / n, n)
            return (f"{side.num_ok}/{n} within their grammar [{low:.2f}, {high:.2f}], {side.num_conformant} complete "
                    "and conformant")

        broken = [(side.num_steps, a) for side in (off, on) if side is not None for a in side.answers
                  if a.finish_reason in (*COMPLETE_FINISH, "length") and not a.is_ok]
        num_5xx = sum(a.is_server_error for side in (off, on) if side is not None for a in side.answers)
        rows = [f"- k={on.num_steps}: {rate(on)}; finish reasons {dict(on.finish_reasons)}"]
        p_value = 1.0
        if off is not None:
            only_on = sum(not a.is_ok and b.is_ok for a, b in zip(on.answers, off.answers))
            only_off = sum(a.is_ok and not b.is_ok for a, b in zip(on.answers, off.answers))
            p_value = mcnemar_exact(only_on, only_off)
            same = sum(a.text == b.text for a, b in zip(on.answers, off.answers))
            rows.insert(0, f"- k=0: {rate(off)}; finish reasons {dict(off.finish_reasons)}")
            rows.append(f"- pairs failing only with speculation on {only_on}, only off {only_off} "
                        f"(McNemar p={p_value:.3g}); same text {same}/{n}")
        for side in (off, on):
            if side is None:
                continue
            reasoned = Counter(a.reasoned for a in side.answers if a.reasoned)
            if reasoned:  # a reasoning model: the grammar governs the answer after its end marker
                rows.append(f"- k={side.num_steps}: reasoning split off by {dict(reasoned)}; the answer judged")
            if side.num_inline_markers:
                rows.append(f"- k={side.num_steps}: {side.num_inline_markers} answers hold an inline {THINK_END} and "
                            "were judged whole (pass --reasoning-parser think to judge the part after it)")
        unjudged = sum(a.finish_reason == "length" and a.is_prefix_valid is None
                       for side in (off, on) if side is not None for a in side.answers)
        if unjudged:  # a server's answers cut by length need the target's tokenizer here (--tokenizer)
            rows.append(f"- {unjudged} answers cut by length not judged: no local tokenizer (pass --tokenizer)")
        rows.extend(f"- k={k} {a.sample_id}: {a.text[:80]!r}" for k, a in broken[:5])
        is_worse = off is not None and p_value < MCNEMAR_ALPHA and on.num_ok < off.num_ok
        status = Status.FAIL if broken or num_5xx or is_worse else Status.PASS
        metric = rate(on) if off is None else f"within grammar: on {on.num_ok}/{n}, off {off.num_ok}/{n}"
        power = f"{n} schemas a side" + ("" if off is not None else "; a running server: no speculation-off side")
        why = []
        if broken:
            why.append(f"{len(broken)} answers break their grammar (completed: schema; cut by length: prefix)")
        if num_5xx:
            why.append(f"{num_5xx} HTTP 5xx")
        if is_worse:
            why.append(f"speculation on fails more (p={p_value:.3g})")
        note = "; ".join(why) or "every answer within its grammar"
        return StageResult(STRUCTURED, status, metric, rule, power, note, tuple(rows))
