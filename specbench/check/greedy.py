"""Check 1, lossless greedy: speculative output equals clean plain decoding, first divergence per request."""

from __future__ import annotations

import time

from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, forced_preemption_overrides, num_preemptions, prompt_list
from specbench.sampling_params import SamplingParams

BF16_MIN_MATCH_RATE = 0.9


def greedy_params(setup: CheckSetup) -> SamplingParams:
    return SamplingParams(max_tokens=setup.max_tokens, ignore_eos=True)


def reference_outputs(setup: CheckSetup) -> list[tuple[int, ...]]:
    """Clean plain greedy decoding (no draft, no fault): the oracle every speculative run is compared with."""
    outs = build_llm(setup, speculative=False).generate(prompt_list(setup), greedy_params(setup))
    return [o.output_token_ids for o in outs]


def first_divergence(got: tuple[int, ...], expected: tuple[int, ...]) -> int | None:
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            return i
    return None if len(got) == len(expected) else min(len(got), len(expected))


def _compare(outs, reference) -> tuple[list[tuple[int, int]], float]:
    """(diverged (request, first divergent position), match rate) of outputs vs the reference."""
    divergences = [(i, first_divergence(o.output_token_ids, ref)) for i, (o, ref) in enumerate(zip(outs, reference))]
    diverged = [(i, d) for i, d in divergences if d is not None]
    total = sum(len(r) for r in reference)
    matched = sum(len(r) if d is None else d for r, (_, d) in zip(reference, divergences))
    return diverged, matched / max(total, 1)


def check_greedy(setup: CheckSetup, reference: list[tuple[int, ...]] | None = None,
                 preemption: bool = True) -> CheckResult:
    """The speculative engine as configured and (preemption) once more with a KV pool that forces preemption."""
    start = time.perf_counter()
    reference = reference if reference is not None else reference_outputs(setup)
    outs = build_llm(setup).generate(prompt_list(setup), greedy_params(setup))
    diverged, rate = _compare(outs, reference)
    p_diverged, p_rate, num_preempted = [], 1.0, 0
    if preemption:
        preempting = build_llm(setup, **forced_preemption_overrides(setup))
        p_diverged, p_rate = _compare(preempting.generate(prompt_list(setup), greedy_params(setup)), reference)
        num_preempted = num_preemptions(preempting)
    if setup.dtype == "fp32":
        passed, rule = not diverged and not p_diverged, "exact identity (fp32)"
    else:
        passed, rule = min(rate, p_rate) >= BF16_MIN_MATCH_RATE, f"match rate >= {BF16_MIN_MATCH_RATE}"
    detail = f"{len(outs) - len(diverged)}/{len(outs)} requests identical, match rate {rate:.3f}; "
    if preemption:
        detail += (f"with forced preemption ({num_preempted} preemptions) {len(outs) - len(p_diverged)}/{len(outs)}, "
                   f"{p_rate:.3f}; ")
    detail += rule
    if diverged or p_diverged:
        listing = ", ".join(f"req {i} @ {d}" for i, d in diverged[:4])
        p_listing = ", ".join(f"req {i} @ {d}" for i, d in p_diverged[:4])
        detail += f"; first divergence: {listing or 'none'}; with preemption: {p_listing or 'none'}"
    return CheckResult("greedy", passed, detail, time.perf_counter() - start)
