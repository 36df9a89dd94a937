"""Check 1, lossless greedy: speculative output equals clean plain decoding, first divergence per request."""

from __future__ import annotations

import math
import time

from specbench.backends.near_tie import NEAR_TIE, NEAR_TIE_MARGIN, classify
from specbench.check.reference import ReferenceCrossCheck, build_reference_llm
from specbench.check.prefix_scenario import cache_summary, run_waves, scenario_engine
from specbench.check.result import CheckResult
from specbench.check.setup import (CheckSetup, build_llm, forced_preemption_overrides, num_preemptions,
                                   preemption_coverage, prompt_list)
from specbench.sampling_params import SamplingParams


def greedy_params(setup: CheckSetup) -> SamplingParams:
    return SamplingParams(max_tokens=setup.max_tokens, ignore_eos=True)


def reference_outputs(setup: CheckSetup) -> list[tuple[int, ...]]:
    """Plain greedy decoding by the reference engine (check/reference.py: synchronous, eager, unfused torch; no
    draft, no fault): the oracle every speculative run is compared with."""
    outs = build_reference_llm(setup.engine).generate(prompt_list(setup), greedy_params(setup))
    return [o.output_token_ids for o in outs]


def first_divergence(got: tuple[int, ...], expected: tuple[int, ...]) -> int | None:
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            return i
    return None if len(got) == len(expected) else min(len(got), len(expected))


def divergence_margins(setup: CheckSetup, prompts: list[tuple[int, ...]], references: list[tuple[int, ...]],
                       positions: list[int]) -> list[float]:
    """Per diverged request: the clean target's top-2 log-probability margin (nats) at its first divergent position,
    given the prompt and the reference's own prefix (dense forward of the reference target, the setup's dtype)."""
    from specbench.check.target_probs import next_token_probs

    model = build_reference_llm(setup.engine).engine.runner.model
    margins = []
    for prompt, reference, d in zip(prompts, references, positions):
        probs = next(next_token_probs(model, [prompt], [reference[:d + 1]], SamplingParams(temperature=1.0),
                                      block_size=setup.engine.block_size))  # [1, d + 1, vocab]
        top = probs[0, d].double().topk(2).values
        margins.append(math.log(top[0]) - math.log(top[1]) if top[1] > 0 else math.inf)
    return margins


def _verdict(setup: CheckSetup, outs, reference: list[tuple[int, ...]]) -> tuple[bool, str]:
    """fp32: every request identical. bf16/fp16: batched verify and single-token decode may flip a near-tied argmax,
    so each first divergence is classified by the clean target's top-2 margin there; only divergent ones fail."""
    divergences = [(i, first_divergence(o.output_token_ids, ref)) for i, (o, ref) in enumerate(zip(outs, reference))]
    diverged = [(i, d) for i, d in divergences if d is not None]
    total = sum(len(r) for r in reference)
    matched = sum(len(r) if d is None else d for r, (_, d) in zip(reference, divergences))
    rate = matched / max(total, 1)
    detail = f"{len(outs) - len(diverged)}/{len(outs)} requests identical, match rate {rate:.3f}"
    if setup.engine.dtype == "fp32" or not diverged:
        detail += ", exact identity" + (" (fp32)" if setup.engine.dtype == "fp32" else "")
        if diverged:
            detail += "; first divergence: " + ", ".join(f"req {i} @ {d}" for i, d in diverged[:8])
        return not diverged, detail
    # A divergence past a reference's end (length mismatch) has no token to compare: it counts as divergent.
    comparable = [(i, d) for i, d in diverged if d < len(reference[i])]
    margins = dict(zip((i for i, _ in comparable), divergence_margins(
        setup, [outs[i].prompt_token_ids for i, _ in comparable], [reference[i] for i, _ in comparable],
        [d for _, d in comparable])))
    verdicts = [(i, d, margins.get(i)) for i, d in diverged]
    num_near = sum(classify(m) == NEAR_TIE for _, _, m in verdicts)
    detail += (f", {setup.engine.dtype}: {num_near} near-tie / {len(verdicts) - num_near} divergent (top-2 margin < "
               f"{NEAR_TIE_MARGIN:g} nats is a near-tie); first divergence: "
               + ", ".join(f"req {i} @ {d} {classify(m)}" + (f" {m:.3f}" if m is not None else "")
                           for i, d, m in verdicts[:8]))
    return num_near == len(verdicts), detail


def greedy_prefix_scenario(setup: CheckSetup, tokenizer) -> tuple[bool, str]:
    """Requests sharing cached prefixes (check/prefix_scenario.py) against the reference, which caches nothing, on the
    very prompts the engine under test ran (its wave 2 extends its own wave-1 outputs)."""
    prompts, overrides = scenario_engine(setup, lambda text: tokenizer(text, add_special_tokens=True)["input_ids"])
    llm = build_llm(setup, **overrides)
    outs = run_waves(llm.generate, prompts, setup.engine.block_size, greedy_params(setup))
    summary = cache_summary(llm)
    del llm
    reference = build_reference_llm(setup.engine).generate([list(o.prompt_token_ids) for o in outs],
                                                           greedy_params(setup))
    passed, detail = _verdict(setup, outs, [o.output_token_ids for o in reference])
    return passed, f"with shared prefixes ({summary}): {detail}"


def check_greedy(setup: CheckSetup, reference: list[tuple[int, ...]] | None = None,
                 preemption: bool = True, cross_check: ReferenceCrossCheck | None = None) -> CheckResult:
    """The speculative engine as configured and (preemption) once more with a KV pool that forces preemption.
    `cross_check`: the reference itself against an outside implementation (the selftest's tiny models); a
    disagreement fails the check, since then the reference is no oracle."""
    start = time.perf_counter()
    reference = reference if reference is not None else reference_outputs(setup)
    llm = build_llm(setup)
    passed, detail = _verdict(setup, llm.generate(prompt_list(setup), greedy_params(setup)), reference)
    tokenizer = llm.tokenizer
    del llm  # one engine at a time
    if cross_check is not None:
        passed = passed and cross_check.is_agreed
        detail += f"; {cross_check.detail}"
    if preemption:
        s_passed, s_detail = greedy_prefix_scenario(setup, tokenizer)
        passed = passed and s_passed
        detail += f"; {s_detail}"
        preempting = build_llm(setup, **forced_preemption_overrides(setup, tokenizer))
        p_passed, p_detail = _verdict(setup, preempting.generate(prompt_list(setup), greedy_params(setup)), reference)
        coverage = preemption_coverage(preempting)
        passed = passed and p_passed
        detail += (f"; with forced preemption ({num_preemptions(preempting)} preemptions): {p_detail}"
                   + (f"; {coverage.note}" if coverage.note else ""))
    return CheckResult("greedy", passed, detail, time.perf_counter() - start)
