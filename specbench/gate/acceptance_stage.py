"""Stage `acceptance`: acceptance at k against the reference file's, two rules.

1. Mean acceptance length AL = 1 + sum_k A_k / D (pooled over requests; A_k rounds accepting draft position k, D
   verify rounds with drafts) within a relative tolerance of the reference's: |AL / AL_ref - 1| <= rtol (vLLM's
   style; two-sided: acceptance far above the reference is a broken measurement or verifier too).
2. A one-sided floor per position: rate_k = A_k / D_k must not be lower than the reference's, by a one-sided Fisher
   exact test on the pooled counts at alpha / k (Bonferroni) (check/acceptance_drop.py). With --acceptance-floor F
   (TensorRT-LLM's style, e.g. 0.95), instead: rate_k >= F x reference rate_k on the point estimates.
Before either rule, the run must have speculated at k (gate/speculation_check.py): the server's own config against
-k, and draft counts present wherever the reference has them; otherwise FAIL ("speculation off?"), never N/A.
Power: the Fisher test's smallest drop found with 80% probability, per position. Rounds are treated as independent
draws, which per-request clustering makes optimistic: the per-request samples are kept in the file for that reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.backends.server_info import ServerSpeculation
from specbench.gate.observed import RequestAcceptance
from specbench.gate.speculation_check import counts_missing, declared_mismatch
from specbench.gate.stage import ACCEPTANCE, StageResult, Status
from specbench.gate.stage_interface import StageInputs
from specbench.gate.stage_options import StageOptions, tolerance
from specbench.metrics import definitions


@dataclass(frozen=True)
class AcceptanceOptions(StageOptions):
    acceptance_rtol: float = tolerance(0.1, "acceptance: allowed |AL/AL_ref - 1|", ok=lambda v: v >= 0)
    acceptance_alpha: float = tolerance(0.01, "acceptance: false-alarm rate of the per-position drop test",
                                        ok=lambda v: 0 < v < 1)
    acceptance_floor: float | None = tolerance(None, "acceptance: instead of the test, rate_k >= FLOOR x reference "
                                               "rate_k (TensorRT-LLM: 0.95)", ok=lambda v: v is None or 0 < v <= 1,
                                               need="must be in (0, 1], e.g. 0.95")


class AcceptanceStage:
    name = ACCEPTANCE
    options = AcceptanceOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        reference = None if inputs.reference is None else inputs.reference.acceptance
        return acceptance_stage(inputs.observation.acceptance, reference, inputs.options(AcceptanceOptions),
                                inputs.num_steps, inputs.observation.server_speculation)


def pooled(requests: Sequence[RequestAcceptance]) -> tuple[int, list[int], list[int]]:
    """(D, [k] drafted per position, [k] accepted per position) summed over requests."""
    width = max((len(r.num_drafted_per_pos) for r in requests), default=0)
    drafted, accepted = [0] * width, [0] * width
    for r in requests:
        for i, (d, a) in enumerate(zip(r.num_drafted_per_pos, r.num_accepted_per_pos)):
            drafted[i] += d
            accepted[i] += a
    return sum(r.num_draft_rounds for r in requests), drafted, accepted


def acceptance_length(requests: Sequence[RequestAcceptance]) -> float | None:
    rounds, _, accepted = pooled(requests)
    return None if rounds == 0 else definitions.acceptance_length(sum(accepted), rounds)


def acceptance_stage(now: Sequence[RequestAcceptance] | None, reference: Sequence[RequestAcceptance] | None,
                     tolerances: AcceptanceOptions, num_steps: int,
                     server: ServerSpeculation | None = None) -> StageResult:
    # scipy's Fisher test, imported when a stage is judged: the gate's command line reads this module's options
    from specbench.check.acceptance_drop import DETECT_POWER, position_tests

    t = tolerances
    floor = (f"rate_k >= {t.acceptance_floor:g} x ref" if t.acceptance_floor is not None else
             f"per-position one-sided Fisher exact, alpha {t.acceptance_alpha:g} (Bonferroni)")
    rule = f"|AL/AL_ref - 1| <= {t.acceptance_rtol:g}; {floor}"
    off = declared_mismatch(server, num_steps) or counts_missing(now is not None, bool(reference))
    if off is not None:
        return StageResult(ACCEPTANCE, Status.FAIL, "no speculation at k" if now is None else "-", rule, "-", off)
    if reference is None:
        return StageResult(ACCEPTANCE, Status.NOT_AVAILABLE, "-", rule, "-", "no reference acceptance (--reference "
                           "from a run at the same k)")
    if now is None:
        return StageResult(ACCEPTANCE, Status.NOT_AVAILABLE, "-", rule, "-",
                           "no per-request draft counts in this run (a server that reports none)")
    al, al_ref = acceptance_length(now), acceptance_length(reference)
    if al is None or al_ref is None:
        return StageResult(ACCEPTANCE, Status.FAIL if al is None and al_ref is not None else Status.NOT_AVAILABLE,
                           f"AL {al} (ref {al_ref})", rule, "-", "no draft rounds")
    _, ref_drafted, ref_accepted = pooled(reference)
    _, drafted, accepted = pooled(now)
    tests = position_tests(ref_accepted, ref_drafted, accepted, drafted, t.acceptance_alpha)
    rates = " ".join(f"{x.rate:.2f}/{x.baseline_rate:.2f}" for x in tests)
    metric = (f"AL {al:.3f} (ref {al_ref:.3f}, {al / al_ref - 1:+.1%}); rate_k now/ref {rates}; "
              f"{len(now)} request sample(s)")
    power = (f"per-position drop >= {', '.join(f'{x.detectable_drop:.2f}' for x in tests)} at "
             f"{DETECT_POWER:.0%} power")
    failures = []
    if abs(al / al_ref - 1) > t.acceptance_rtol:
        failures.append(f"AL {al / al_ref - 1:+.1%} beyond ±{t.acceptance_rtol:.0%}")
    if t.acceptance_floor is not None:
        low = [x for x in tests if x.rate < t.acceptance_floor * x.baseline_rate]
        failures += [f"pos {x.position} rate {x.rate:.3f} < {t.acceptance_floor:g} x {x.baseline_rate:.3f}"
                     for x in low]
    else:
        failures += [f"pos {x.position} dropped {x.baseline_rate:.3f} -> {x.rate:.3f} (p={x.p_value:.2g})"
                     for x in tests if x.is_drop]
    if failures:
        return StageResult(ACCEPTANCE, Status.FAIL, metric, rule, power, "; ".join(failures))
    return StageResult(ACCEPTANCE, Status.PASS, metric, rule, power, "within tolerance")
