"""Check 1, lossless greedy: speculative output equals clean plain decoding, first divergence per request."""

from __future__ import annotations

import time

from specbench.backends.near_tie import NEAR_TIE_MARGIN, TieDiagnosis, classify
from specbench.check.reference import ReferenceCrossCheck, build_reference_llm
from specbench.check.prefix_scenario import cache_summary, run_waves, scenario_engine
from specbench.check.result import CheckResult
from specbench.check.setup import (CheckSetup, build_llm, forced_preemption_overrides, num_preemptions,
                                   preemption_coverage, prompt_list)
from specbench.sampling_params import SamplingParams
from specbench.verification.lossless import OutputPair, judge_lossless


def greedy_params(setup: CheckSetup) -> SamplingParams:
    return SamplingParams(max_tokens=setup.max_tokens, ignore_eos=True)


def request_params(setup: CheckSetup) -> SamplingParams | list[SamplingParams]:
    """The greedy check's requests: EOS ignored (every request runs max_tokens), or on a constrained setup each
    prompt's grammar, EOS honoured (a finished document ends there: the grammar allows only EOS after it)."""
    if not setup.is_constrained:
        return greedy_params(setup)
    return [SamplingParams(max_tokens=setup.max_tokens, grammar=g) for g in setup.grammars]


def reference_outputs(setup: CheckSetup) -> list[tuple[int, ...]]:
    """Plain greedy decoding by the reference engine (check/reference.py: synchronous, eager, unfused torch; no
    draft, no fault): the oracle every speculative run is compared with. On a constrained setup the reference decodes
    under the same grammars: one masked row per step, no drafts to walk, reject or roll back."""
    outs = build_reference_llm(setup.engine).generate(prompt_list(setup), request_params(setup))
    return [o.output_token_ids for o in outs]


def divergence_margins(setup: CheckSetup, prompts: list[tuple[int, ...]], references: list[tuple[int, ...]],
                       positions: list[int]) -> list[float]:
    """Per diverged request: the clean target's top-2 log-probability margin (nats) at its first divergent position,
    given the prompt and the reference's own prefix (dense forward of the reference target, the setup's dtype)."""
    from specbench.check.near_tie_margin import top_two

    model = build_reference_llm(setup.engine).engine.runner.model
    return [top_two(model, prompt, reference, d, block_size=setup.engine.block_size).margin
            for prompt, reference, d in zip(prompts, references, positions)]


def lossless_verdict(setup: CheckSetup, outs, reference: list[tuple[int, ...]]) -> tuple[bool, str]:
    """fp32: every request identical. bf16/fp16: batched verify and single-token decode may flip a near-tied argmax,
    so each first divergence is classified by the clean target's top-2 margin there; only divergent ones fail
    (verification/lossless.py's rule; a request is a pair keyed by its index)."""
    pairs = [OutputPair(str(i), 0, tuple(o.output_token_ids), tuple(ref))
             for i, (o, ref) in enumerate(zip(outs, reference))]
    total = sum(len(r) for r in reference)
    matched = sum(len(r) if p.first_divergence is None else p.first_divergence for r, p in zip(reference, pairs))
    rate = matched / max(total, 1)
    exact = setup.engine.dtype == "fp32"
    result = judge_lossless(pairs, None if exact else lambda mismatched: _margins(setup, outs, mismatched))
    diverged = result.mismatches
    detail = f"{len(outs) - len(diverged)}/{len(outs)} requests identical, match rate {rate:.3f}"
    if exact or not diverged:
        detail += ", exact identity" + (" (fp32)" if exact else "")
        if diverged:
            detail += "; first divergence: " + ", ".join(f"req {p.sample_id} @ {p.first_divergence}"
                                                         for p in diverged[:8])
        return not diverged, detail
    detail += (f", {setup.engine.dtype}: {result.num_near_ties} near-tie / {result.num_divergent} divergent (top-2 "
               f"margin < {NEAR_TIE_MARGIN:g} nats is a near-tie); first divergence: "
               + ", ".join(f"req {p.sample_id} @ {p.first_divergence} {p.diagnosis.verdict}"
                           + (f" {p.diagnosis.margin:.3f}" if p.diagnosis.margin is not None else "")
                           for p in diverged[:8]))
    return result.num_divergent == 0, detail


def _margins(setup: CheckSetup, outs, mismatched: list[OutputPair]) -> list[TieDiagnosis]:
    """Each mismatch's verdict from its top-2 margin (one reference model for them all). A divergence past a
    reference's end (length mismatch) has no token to compare: no margin, so unclassified, so divergent."""
    comparable = [p for p in mismatched if p.first_divergence < len(p.ref)]
    margins = dict(zip((p.sample_id for p in comparable), divergence_margins(
        setup, [outs[int(p.sample_id)].prompt_token_ids for p in comparable], [p.ref for p in comparable],
        [p.first_divergence for p in comparable])))
    return [TieDiagnosis(classify(m), m, (), None) for m in (margins.get(p.sample_id) for p in mismatched)]


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
    passed, detail = lossless_verdict(setup, outs, [o.output_token_ids for o in reference])
    return passed, f"with shared prefixes ({summary}): {detail}"


def check_greedy(setup: CheckSetup, reference: list[tuple[int, ...]] | None = None,
                 preemption: bool = True, cross_check: ReferenceCrossCheck | None = None) -> CheckResult:
    """The speculative engine as configured and (preemption) once more with a KV pool that forces preemption.
    `cross_check`: the reference itself against an outside implementation (the selftest's tiny models); a
    disagreement fails the check, since then the reference is no oracle."""
    start = time.perf_counter()
    reference = reference if reference is not None else reference_outputs(setup)
    llm = build_llm(setup)
    passed, detail = lossless_verdict(setup, llm.generate(prompt_list(setup), greedy_params(setup)), reference)
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
        p_passed, p_detail = lossless_verdict(setup, preempting.generate(prompt_list(setup), greedy_params(setup)),
                                              reference)
        coverage = preemption_coverage(preempting)
        passed = passed and p_passed
        detail += (f"; with forced preemption ({num_preemptions(preempting)} preemptions): {p_detail}"
                   + (f"; {coverage.note}" if coverage.note else ""))
    return CheckResult("greedy", passed, detail, time.perf_counter() - start)
