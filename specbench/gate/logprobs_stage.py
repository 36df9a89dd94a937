"""Stage `logprobs`: the logprobs a speculative run reports, three ways.

1. Invariants that need no reference (the run under test only): every logprob is <= 0 and not NaN; a token reports
   exactly 0.0 only when its listed alternatives are >= ZERO_GAP nats below (else it is llama.cpp #27972's "0.0 for
   every token"); the top-n was listed when asked; the chosen token's logprob equals its own top-n entry; a greedy
   token is the argmax (its logprob >= the top-1's - INVARIANT_ATOL); the listed candidates hold probability <= 1
   (logsumexp <= 0). Any violation fails.
2. Output tokens against the k = 0 reference, position by position while the two greedy token sequences agree:
   |chosen-token logprob diff| and the top-n values, and the top-n set (a token clearly inside one side's top-n,
   atol above its n-th value, must be listed on the other). At the first divergent position only the distribution
   is compared (same context, different choice); the divergence itself is the lossless stage's, and its reference
   top-2 margin says whether it was a near-tie. Catches vLLM #34497 (accepted drafts' logprobs read off the wrong row).
3. A prompt-logprob perplexity scan: per prompt, perplexity exp(-mean prompt logprob) within ppl_rtol of the
   reference's, and every prompt token's logprob within atol (vLLM #53488: prompt_logprobs silently corrupted).

A token is "off" when some compared value differs by more than atol; 2 and 3 fail when more than
floor(off_fraction x N) of their N compared tokens are off (batch-shape noise of 16-bit kernels moves a rare token).
atol defaults by dtype: fp32 engines FP32_ATOL, 16-bit engines and servers (dtype unknown) HALF_ATOL (vs k = 0 only:
the invariants compare values of one row, to INVARIANT_ATOL).
Power: any per-token error > atol on more than the allowed count of the N tokens compared; nothing after a
divergence. N/A (not FAIL) when the server sends no logprobs, or no reference logprobs exist; FAIL when a response's
logprobs do not hold together (parallel lists of unequal length, fewer entries than generated tokens, a prompt's
logprobs of another length than the reference's): the tokens sent would pass for all of them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.backends.server_logprobs import ServerTokenLogprob
from specbench.gate.logprobs_collect import TOP_N, LogprobsRun, LogprobsSample
from specbench.gate.lossless_stage import LosslessOptions
from specbench.gate.stage import LOGPROBS, StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions, tolerance
from specbench.runs.sweep_config import SweepConfig

FP32_ATOL = 2e-3  # nats: fp32 verify (k + 1 rows) vs single-row decode differ by summation order only
HALF_ATOL = 0.3  # nats: bf16 logits hold 8 bits (1 ulp is 0.125 at |logit| 16-32), and a verify of k + 1 rows and
# a one-row decode take different kernels through every layer; a row-shift error is nats, a zeroed one an invariant
# the invariants compare values of one row of one response (the chosen token, its own top-n entry, the top-1): equal
# but for how a server rounds what it prints, whatever the dtype
INVARIANT_ATOL = 0.01
FP32_PPL_RTOL = 1e-3
HALF_PPL_RTOL = 0.02
ZERO_GAP = 15.0  # nats: float32 log_softmax gives exactly 0.0 only when every other token is ~17 nats below
MASS_SLACK = 1e-3
UNDECODABLE = "\ufffd"  # what a token holding part of a UTF-8 character decodes to
SHOW = 5


@dataclass(frozen=True)
class LogprobsOptions(StageOptions):
    logprobs_atol: float | None = tolerance(None, "logprobs: allowed |diff| per token, nats (default: 0.002 for an "
                                            "fp32 engine, 0.3 for 16-bit engines and servers)",
                                            ok=lambda v: v is None or v > 0)
    logprobs_ppl_rtol: float | None = tolerance(None, "logprobs: allowed |ppl/ppl_ref - 1| per prompt (default: "
                                                "0.001 fp32, 0.02 otherwise)", ok=lambda v: v is None or v > 0)
    logprobs_off_fraction: float = tolerance(0.01, "logprobs: fraction of compared tokens allowed beyond "
                                             "--logprobs-atol", ok=lambda v: 0 <= v < 1)


class LogprobsStage:
    name = LOGPROBS
    options = LogprobsOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        logprobs, reference = inputs.logprobs, inputs.reference
        assert logprobs is not None
        baseline = logprobs.baseline
        if baseline is None and reference is not None:
            baseline = reference.logprobs and dataclasses.replace(
                reference.logprobs, label=f"reference file, {reference.logprobs.label}")
        # the divergence a logprobs comparison stops at is judged by the lossless stage's near-tie margin
        tolerance = logprobs_tolerance(inputs.options(LogprobsOptions),
                                       inputs.options(LosslessOptions).near_tie_margin, inputs.sweep)
        return logprobs_stage(logprobs.now, baseline, tolerance)


@dataclass(frozen=True)
class LogprobsTolerance:
    atol: float  # nats, per token value
    ppl_rtol: float  # per prompt |ppl / ppl_ref - 1|
    off_fraction: float  # of the compared tokens allowed beyond atol
    near_tie_margin: float  # nats: a divergence below it is a near-tie
    basis: str  # why these values: "fp32 engine" | "16-bit engine" | "server, dtype unknown" | "--logprobs-atol"

    def allowed(self, num: int) -> int:
        return math.floor(self.off_fraction * num)


@dataclass(frozen=True)
class _Compared:
    num: int  # tokens compared
    num_off: int  # beyond atol
    max_diff: float  # nats, largest compared difference
    details: tuple[str, ...]  # the first offending tokens


def invariant_violations(samples: Sequence[LogprobsSample], atol: float) -> list[str]:
    out = []
    for s in samples:
        for i, e in enumerate(s.output):
            why = _violation(e, atol, is_greedy=True)
            if why:
                out.append(f"sample {s.sample_id} output token {i} {e.token!r}: {why}")
        for i, e in enumerate(s.prompt or ()):
            why = None if e is None else _violation(e, atol, is_greedy=False)
            if why:
                out.append(f"sample {s.sample_id} prompt token {i} {e.token!r}: {why}")
    return out


def _violation(e: ServerTokenLogprob, atol: float, *, is_greedy: bool) -> str | None:
    lp = e.logprob
    if lp is None:
        return "no logprob"
    if math.isnan(lp) or lp > 1e-6:
        return f"logprob {lp} is not <= 0"
    if not e.top:
        return f"logprob {lp} without the top-{TOP_N} asked for"
    values = _by_text(e.top)
    if lp == 0.0 and any(v > -ZERO_GAP for t, v in e.top if t != e.token):
        return f"exactly 0.0 although an alternative is listed at {max(v for t, v in e.top if t != e.token):.3f}"
    if e.token in values and abs(values[e.token] - lp) > atol:
        return f"logprob {lp:.4f} but {values[e.token]:.4f} in its own top-n"
    if is_greedy and lp < e.top[0][1] - atol:
        return f"greedy token at {lp:.4f} below the top-1 {e.top[0][0]!r} at {e.top[0][1]:.4f}"
    # the listed candidates, and the chosen token where it is not among them (logsumexp of them all <= 0)
    mass = sum(math.exp(v) for _, v in e.top) + (math.exp(lp) if e.token not in dict(e.top) else 0.0)
    if mass > 1 + MASS_SLACK:
        return f"listed candidates hold probability {mass:.4f} > 1"
    return None


def _by_text(top: Sequence[tuple[str, float]]) -> dict[str, float]:
    """top-n by token text, leaving out texts that distinct ids can share (listed twice, or holding U+FFFD: a partial
    UTF-8 character): by text their entries cannot be told apart, on one side or across the two."""
    texts = [t for t, _ in top]
    return {t: v for t, v in top if texts.count(t) == 1 and UNDECODABLE not in t}


def _value_diffs(a: ServerTokenLogprob, b: ServerTokenLogprob, atol: float, *, chosen: bool) -> tuple[float, str]:
    """(largest |diff| over the chosen token (when `chosen`) and the top-n entries both list, why a top-n set
    differs beyond ties ('' when it does not)). `a` is the run under test, `b` the reference."""
    diffs = [abs(a.logprob - b.logprob)] if chosen and a.logprob is not None and b.logprob is not None else []
    top_a, top_b = _by_text(a.top), _by_text(b.top)
    diffs += [abs(top_a[t] - top_b[t]) for t in top_a.keys() & top_b.keys()]
    missing = ""
    for have, other, side in ((top_b, top_a, "run"), (top_a, top_b, "reference")):
        if len(other) < min(len(have), TOP_N) or not have:
            continue
        floor = min(other.values())
        lost = [t for t, v in have.items() if t not in other and v > floor + atol]
        if lost:
            missing = f"{lost[0]!r} missing from the {side}'s top-n"
    return max(diffs, default=0.0), missing


def compare_outputs(now: Sequence[LogprobsSample], ref: Sequence[LogprobsSample],
                    tol: LogprobsTolerance) -> tuple[_Compared, list[str]]:
    """Output tokens compared while the sequences agree; (the comparison, one note per divergence)."""
    by_id = {s.sample_id: s for s in ref}
    num = num_off = 0
    max_diff, details, notes = 0.0, [], []
    for s in now:
        r = by_id.get(s.sample_id)
        if r is None:
            continue
        for i, (a, b) in enumerate(zip(s.output, r.output)):
            same = a.token == b.token and (a.token_id is None or b.token_id is None or a.token_id == b.token_id)
            diff, missing = _value_diffs(a, b, tol.atol, chosen=same)
            num += 1
            max_diff = max(max_diff, diff)
            if diff > tol.atol or missing:
                num_off += 1
                if len(details) < SHOW:
                    details.append(f"sample {s.sample_id} output token {i} {a.token!r}: "
                                   + (missing or f"|diff| {diff:.4f} > {tol.atol:g}"))
            if not same:
                margin = b.top[0][1] - b.top[1][1] if len(b.top) >= 2 else None
                kind = ("near-tie" if margin is not None and margin < tol.near_tie_margin else "divergent")
                shown = "" if margin is None else f", reference top-2 margin {margin:.4f} nats"
                notes.append(f"sample {s.sample_id}: tokens diverge at output token {i} ({a.token!r} vs "
                             f"{b.token!r}; {kind}{shown}): later tokens not compared")
                break
    return _Compared(num, num_off, max_diff, tuple(details)), notes


def compare_prompts(now: Sequence[LogprobsSample], ref: Sequence[LogprobsSample],
                    tol: LogprobsTolerance) -> tuple[_Compared, list[str], float, list[str]]:
    """Prompt tokens compared one by one, and per prompt perplexity; (comparison, ppl failures, largest ppl rdiff,
    prompts whose logprobs differ in length from the reference's: one prompt, one length, else tokens went missing)."""
    by_id = {s.sample_id: s for s in ref}
    num = num_off = 0
    max_diff, worst_ppl, details, ppl_fail, uneven = 0.0, 0.0, [], [], []
    for s in now:
        r = by_id.get(s.sample_id)
        if r is None or s.prompt is None or r.prompt is None:
            continue
        if len(s.prompt) != len(r.prompt):
            uneven.append(f"sample {s.sample_id}: logprobs for {len(s.prompt)} prompt tokens, {len(r.prompt)} in the "
                          "reference")
            continue
        pairs = [(a, b) for a, b in zip(s.prompt, r.prompt, strict=True)
                 if a is not None and b is not None and a.logprob is not None and b.logprob is not None]
        for i, (a, b) in enumerate(pairs):
            diff = abs(a.logprob - b.logprob)
            num += 1
            max_diff = max(max_diff, diff)
            if diff > tol.atol:
                num_off += 1
                if len(details) < SHOW:
                    details.append(f"sample {s.sample_id} prompt token {i + 1} {b.token!r}: "
                                   f"{a.logprob:.4f} vs {b.logprob:.4f}")
        if pairs:
            ppl = math.exp(-sum(a.logprob for a, _ in pairs) / len(pairs))
            ppl_ref = math.exp(-sum(b.logprob for _, b in pairs) / len(pairs))
            rdiff = abs(ppl / ppl_ref - 1)
            worst_ppl = max(worst_ppl, rdiff)
            if rdiff > tol.ppl_rtol:
                ppl_fail.append(f"sample {s.sample_id} prompt perplexity {ppl:.4g} vs {ppl_ref:.4g} "
                                f"({ppl / ppl_ref - 1:+.2%})")
    return _Compared(num, num_off, max_diff, tuple(details)), ppl_fail, worst_ppl, uneven


def logprobs_stage(now: LogprobsRun | None, reference: LogprobsRun | None, tol: LogprobsTolerance) -> StageResult:
    rule = (f"invariants; per token |diff| <= {tol.atol:g} nats on all but {tol.off_fraction:.0%} of tokens "
            f"(outputs while tokens agree, prompts); prompt perplexity within {tol.ppl_rtol:g} ({tol.basis})")
    if now is None or now.samples is None:
        return StageResult(LOGPROBS, Status.NOT_AVAILABLE, "-", rule, "-",
                           "no logprobs: " + (now.missing if now is not None else "not measured"))
    samples = now.samples
    violations = invariant_violations(samples, INVARIANT_ATOL)
    num_tokens = sum(len(s.output) for s in samples)
    failures = [f"{len(violations)} invariant violation(s)"] if violations else []
    if now.malformed:  # never a pass on the tokens that happened to be sent
        failures.insert(0, f"{len(now.malformed)} malformed logprobs response(s)")
    details = [*now.malformed[:SHOW], *violations[:SHOW]]
    parts = [f"{num_tokens} output tokens, {len(violations)} invariant violations"]
    if now.malformed:
        parts.append(f"{len(now.malformed)} response(s) with malformed logprobs")
    powers = [f"invariants on every token ({num_tokens} output)"]
    ref_samples = None if reference is None else reference.samples
    if reference is not None and reference.malformed:
        failures.append(f"{len(reference.malformed)} malformed logprobs response(s) from the reference")
        details += reference.malformed[:SHOW]
    if ref_samples is None:
        parts.append("no reference logprobs" + ("" if reference is None else f" ({reference.missing})"))
    else:
        out, notes = compare_outputs(samples, ref_samples, tol)
        parts.append(f"outputs vs {reference.label}: {out.num_off}/{out.num} tokens off, max |diff| "
                     f"{out.max_diff:.2g}")
        powers.append(f"output error > {tol.atol:g} nats on > {tol.allowed(out.num)} of {out.num} tokens")
        if out.num_off > tol.allowed(out.num):
            failures.append(f"{out.num_off} output token(s) off (> {tol.allowed(out.num)} allowed)")
            details += out.details
        elif out.num == 0:
            failures.append("no output token compared")
        details += notes[:SHOW]
        prompts, ppl_fail, worst, uneven = compare_prompts(samples, ref_samples, tol)
        if uneven:
            failures.append(f"{len(uneven)} prompt(s) with logprobs of another length than the reference's")
            details += uneven[:SHOW]
        if prompts.num:
            parts.append(f"prompts: {prompts.num_off}/{prompts.num} tokens off, max |diff| {prompts.max_diff:.2g},"
                         f" worst ppl {worst:.2%}")
            powers.append(f"prompt error > {tol.atol:g} nats on > {tol.allowed(prompts.num)} of {prompts.num} "
                          f"tokens, or a perplexity shift > {tol.ppl_rtol:.2%}")
            if prompts.num_off > tol.allowed(prompts.num):
                failures.append(f"{prompts.num_off} prompt token(s) off (> {tol.allowed(prompts.num)} allowed)")
                details += prompts.details
            if ppl_fail:
                failures.append(f"{len(ppl_fail)} prompt perplexity shift(s)")
                details += ppl_fail[:SHOW]
        else:
            parts.append("no prompt logprobs on both sides (no perplexity scan)")
    metric, power = "; ".join(parts), "; ".join(powers)
    if failures:
        return StageResult(LOGPROBS, Status.FAIL, metric, rule, power, "; ".join(failures), tuple(details))
    if ref_samples is None:
        return StageResult(LOGPROBS, Status.PASS, metric, rule, power,
                           "invariants hold; no reference logprobs to compare with", tuple(details))
    return StageResult(LOGPROBS, Status.PASS, metric, rule, power, "within tolerance", tuple(details))


def logprobs_tolerance(tolerances: LogprobsOptions, near_tie_margin: float,
                       config: SweepConfig) -> LogprobsTolerance:
    """The stage's tolerance: --logprobs-atol / --logprobs-ppl-rtol where given, else by the engine's dtype (an fp32
    engine: FP32_*; a 16-bit one, or a server whose dtype the gate cannot know: HALF_*)."""
    if not config.is_embedded:
        is_fp32, basis = False, "server of unknown dtype: 16-bit values"
    else:
        from specbench.engine.builder import resolve_device

        dtype = config.engine.dtype
        is_fp32 = dtype == "fp32" or (dtype == "auto" and resolve_device(config.engine.device).type == "cpu")
        basis = "fp32 engine" if is_fp32 else "16-bit engine"
    atol = tolerances.logprobs_atol if tolerances.logprobs_atol is not None else FP32_ATOL if is_fp32 else HALF_ATOL
    rtol = (tolerances.logprobs_ppl_rtol if tolerances.logprobs_ppl_rtol is not None else
            FP32_PPL_RTOL if is_fp32 else HALF_PPL_RTOL)
    num_given = (tolerances.logprobs_atol is not None) + (tolerances.logprobs_ppl_rtol is not None)
    if num_given:
        basis = "as given" if num_given == 2 else basis + ", partly as given"
    return LogprobsTolerance(atol, rtol, tolerances.logprobs_off_fraction, near_tie_margin, basis)
