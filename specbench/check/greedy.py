"""Check 1, lossless greedy: speculative output equals clean plain decoding, first divergence per request."""

from __future__ import annotations

import time

from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, prompt_list
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


def check_greedy(setup: CheckSetup, reference: list[tuple[int, ...]] | None = None) -> CheckResult:
    start = time.perf_counter()
    reference = reference if reference is not None else reference_outputs(setup)
    outs = build_llm(setup).generate(prompt_list(setup), greedy_params(setup))
    divergences = [(i, first_divergence(o.output_token_ids, ref)) for i, (o, ref) in enumerate(zip(outs, reference))]
    diverged = [(i, d) for i, d in divergences if d is not None]
    total = sum(len(r) for r in reference)
    matched = sum(len(r) if d is None else d for r, (_, d) in zip(reference, divergences))
    rate = matched / max(total, 1)
    listing = ", ".join(f"req {i} @ {d}" for i, d in diverged[:8])
    passed = not diverged if setup.dtype == "fp32" else rate >= BF16_MIN_MATCH_RATE
    rule = "exact identity (fp32)" if setup.dtype == "fp32" else f"match rate >= {BF16_MIN_MATCH_RATE}"
    detail = f"{len(outs) - len(diverged)}/{len(outs)} requests identical, match rate {rate:.3f}, {rule}"
    if diverged:
        detail += f"; first divergence: {listing}"
    return CheckResult("greedy", passed, detail, time.perf_counter() - start)
