"""Stage `lossless`: greedy outputs at k equal the k = 0 outputs on the same prompts, near-tie aware.

The rule is verification/lossless.py's; this module words it as a stage. A mismatch is diagnosed as check-lossless
does (backends/near_tie.py: the top-2 logprob margin at the first divergent token, from a server that gives
logprobs); without a probe it stays unclassified and counts as divergent.
Pass: every prompt answered on both sides and no divergent mismatch (--strict: no mismatch at all).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.backends.near_tie import NEAR_TIE_MARGIN
from specbench.gate.observed import GreedyOutput
from specbench.gate.stage import LOSSLESS, StageResult, Status
from specbench.gate.stage_interface import Probe, StageInputs
from specbench.gate.stage_options import StageOptions, tolerance
from specbench.verification.lossless import each, judge_lossless, paired_by_key

SHOW = 5


@dataclass(frozen=True)
class LosslessOptions(StageOptions):
    near_tie_margin: float = tolerance(NEAR_TIE_MARGIN, "lossless: a mismatch whose top-2 logprob margin is below "
                                       "this many nats is a near-tie", ok=lambda v: v >= 0)
    strict: bool = tolerance(False, "lossless: near-ties fail too")


class LosslessStage:
    name = LOSSLESS
    options = LosslessOptions

    def judge(self, inputs: StageInputs) -> StageResult:
        observation, reference, options = inputs.observation, inputs.reference, inputs.options(LosslessOptions)
        if observation.baseline_outputs is not None:
            return lossless_stage(observation.spec_outputs, observation.baseline_outputs, "k=0 of this run", options,
                                  inputs.probe)
        greedy = None if reference is None else reference.greedy_outputs
        source = "" if reference is None else f"reference file, {reference.greedy_source}"
        return lossless_stage(observation.spec_outputs, greedy, source, options, inputs.probe)


def lossless_stage(spec: tuple[GreedyOutput, ...], baseline: tuple[GreedyOutput, ...] | None, baseline_source: str,
                   tolerances: LosslessOptions, probe: Probe | None) -> StageResult:
    rule = ("identical text on every prompt" if tolerances.strict else
            f"no divergent mismatch (near-tie: top-2 margin < {tolerances.near_tie_margin:g} nats"
            f"{'' if probe else '; no logprobs probe here, so every mismatch counts as divergent'})")
    if baseline is None:
        return StageResult(LOSSLESS, Status.NOT_AVAILABLE, "-", rule, "-",
                           "no k = 0 outputs: the run has no k = 0 cell and no --reference was given")
    pairs, missing = paired_by_key([((o.sample_id, o.turn), o.text) for o in spec],
                                   [((o.sample_id, o.turn), o.text) for o in baseline])
    result = judge_lossless(pairs, probe and each(lambda p: probe(p.sample_id, p.turn, p.ref, p.spec)), missing)
    power = f"{len(pairs)} prompts compared character for character (baseline: {baseline_source})"
    details = []
    for pair in result.mismatches:
        diagnosis, at = pair.diagnosis, pair.first_divergence
        why = f": {diagnosis.note}" if diagnosis.margin is None else f", margin {diagnosis.margin:.4f} nats"
        details.append(f"sample {pair.sample_id} turn {pair.turn}: differs at char {at}: k {pair.spec[at:at + 30]!r} "
                       f"vs baseline {pair.ref[at:at + 30]!r} [{diagnosis.verdict}{why}]")
    near, divergent, mismatches = result.num_near_ties, result.num_divergent, result.mismatches
    metric = f"{len(pairs) - len(mismatches)}/{len(pairs)} identical, {near} near-tie, {divergent} divergent"
    if not pairs:
        return StageResult(LOSSLESS, Status.FAIL, metric, rule, power, "no prompt answered at k and in the baseline")
    if not result.passes(tolerances.strict):
        why = (f"{missing} prompt(s) without a k answer" if missing else
               f"{len(mismatches) if tolerances.strict else divergent} prompt(s) differ from the baseline")
        return StageResult(LOSSLESS, Status.FAIL, metric, rule, power, why, tuple(details[:SHOW]))
    return StageResult(LOSSLESS, Status.PASS, metric, rule, power,
                       "identical" if not mismatches else f"{near} near-tie mismatch(es) only", tuple(details[:SHOW]))
