"""Check 3, draft oracle: every recorded draft-step logit vs a cache-free recomputation on the same prefix.

Draft LM: one fresh prefill (new KV, positions 0..n-1) over the committed tokens plus the drafts fed
so far; its last row must match the step's logits. All steps of one round share a prefix, so one
forward per round serves all of them. Tree rounds: check/tree_oracle.py. EAGLE / EAGLE-3 / MTP (the MTP module drafts as an EAGLE-1-shaped head):
see `eagle_oracle` (the head's chain over target features it recomputes from the committed tokens with a cache-free
target forward). This catches position, metadata, KV-slice, catch-up, phase-leak and feature-row bugs that never
change greedy output.
"""

from __future__ import annotations

import time
from collections import defaultdict

from specbench.check.draft_recompute import recompute_draft_logits
from specbench.check.eagle_oracle import compare_eagle_records
from specbench.check.greedy import greedy_params
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.prefix_scenario import cache_summary, run_waves, scenario_engine
from specbench.check.result import CheckResult
from specbench.check.setup import (CheckSetup, build_llm, forced_preemption_overrides, num_preemptions,
                                   preemption_coverage, prompt_list)
from specbench.check.tree_oracle import TREE_ROUND, compare_tree_records, mismatch_kind
from specbench.llm import LLM
from specbench.speculation.capabilities import ConsumesTargetFeatures, RecordsDraftLogits
from specbench.speculation.draft_records import DraftRecorder, group_rounds
from specbench.speculation.drafters.mtp.multi_module import MultiModuleMtpProposer
from specbench.speculation.registry import methods_with

FP32_RTOL = 1e-4  # of the logits' max magnitude
BF16_RTOL = 3e-2


def compare_records(proposer, records, rtol: float) -> tuple[int, list[str]]:
    """(records compared, mismatch descriptions); one recompute per round (its steps share a prefix)."""
    bad: list[str] = []
    for recs in group_rounds(records):
        longest = max(recs, key=lambda r: r.step)
        logits = recompute_draft_logits(proposer, longest.token_ids)
        for rec in recs:
            ref = logits[len(rec.token_ids) - 1]
            err = (rec.logits - ref).abs().max().item()
            if err > rtol * max(1.0, ref.abs().max().item()):
                bad.append(f"{rec.request_id} step {rec.step} at position {len(rec.token_ids) - 1}: max |diff| {err:.3g}")
    return len(records), bad


def record_and_compare(llm: LLM, reference: LLM, prompts: list, params, rtol: float,
                       run=None) -> tuple[int, list[str]]:
    """Generate with a recorder attached, then compare every recorded draft step with its cache-free recompute
    ((records compared, mismatch descriptions)) by `reference`'s models: the same method and weights under the
    reference settings (check/reference.py), never the engine's own. EAGLE recomputes the target features too,
    from the committed tokens, with the reference target."""
    proposer = llm.engine.proposer
    assert isinstance(proposer, RecordsDraftLogits), "check_oracle runs only methods whose drafts it can record"
    recorder = DraftRecorder()
    proposer.attach_recorder(recorder)
    if run is None:
        llm.generate(prompts, params)
    else:  # `run(generate)`: several generate calls on the engine (check/prefix_scenario.py)
        run(llm.generate)
    proposer.attach_recorder(None)
    ref_proposer, ref_target = reference.engine.proposer, reference.engine.runner.model
    num, bad = compare_tree_records(ref_proposer, ref_target, recorder.trees, rtol)  # tree rounds (tree_oracle.py)
    if isinstance(ref_proposer, ConsumesTargetFeatures):  # the head's chain over recomputed features
        num_chain, bad_chain = compare_eagle_records(ref_proposer, ref_target, recorder.steps, rtol)
    else:
        num_chain, bad_chain = compare_records(ref_proposer, recorder.steps, rtol)
    return num + num_chain, bad_chain + bad


def oracle_prefix_scenario(setup: CheckSetup, reference: LLM, rtol: float) -> tuple[int, list[str], str]:
    """(records compared, mismatches, a detail phrase) of the shared-prefix scenario's drafts (check/prefix_scenario.py)
    against `reference`'s cache-free recompute."""
    prompts, overrides = scenario_engine(setup, reference.engine.encode)
    llm = build_llm(setup, **overrides)
    num, bad = record_and_compare(
        llm, reference, [], greedy_params(setup), rtol,
        run=lambda generate: run_waves(generate, prompts, setup.engine.block_size, greedy_params(setup)))
    return num, [f"{line} (shared-prefix run)" for line in bad], f"; a shared-prefix run: {cache_summary(llm)}"


def check_oracle(setup: CheckSetup, preemption: bool = True) -> CheckResult:
    start = time.perf_counter()
    if setup.engine.method not in methods_with(RecordsDraftLogits):
        return CheckResult("oracle", True, f"no draft oracle for method {setup.engine.method!r} (no draft model)",
                           time.perf_counter() - start, skipped=True)
    rtol = FP32_RTOL if setup.engine.dtype == "fp32" else BF16_RTOL
    num, bad, preempted, coverage = 0, [], 0, None
    reference = build_reference_drafting_llm(setup.engine)
    # as configured, then preempting
    runs = ({}, forced_preemption_overrides(setup, reference.tokenizer)) if preemption else ({},)
    ref_proposer = reference.engine.proposer
    if setup.draft_shape.is_tree and isinstance(ref_proposer, MultiModuleMtpProposer) and len(ref_proposer.modules) > 1:
        return CheckResult("oracle", True, "no tree oracle for several MTP modules: their tree steps reuse module 0 "
                           "(EagleProposer.propose_tree), their chains run module j at step j; which rule a tree "
                           "follows is not settled", time.perf_counter() - start, skipped=True)
    for overrides in runs:
        llm = build_llm(setup, **overrides)
        run_num, run_bad = record_and_compare(llm, reference, prompt_list(setup), greedy_params(setup), rtol)
        num, bad = num + run_num, bad + [f"{line}{' (preempting run)' if overrides else ''}" for line in run_bad]
        if overrides:
            preempted, coverage = num_preemptions(llm), preemption_coverage(llm)
    scenario = ""
    if preemption:  # requests sharing cached prefixes: drafters resuming at a hit (check/prefix_scenario.py)
        run_num, run_bad, scenario = oracle_prefix_scenario(setup, reference, rtol)
        num, bad = num + run_num, bad + run_bad
    by_kind: dict[str, int] = defaultdict(int)
    for line in bad:
        by_kind[mismatch_kind(line) if TREE_ROUND in line else f"step {line.split(' step ')[1].split()[0]}"] += 1
    if setup.draft_shape.is_tree:
        detail = (f"{num} tree-round laws (root and fed nodes) against a cache-free recompute along each branch "
                  f"(rtol {rtol:g}, x (1 + step)^2 along an EAGLE/MTP chain), the tree shape and top-k choice checked")
    else:
        detail = (f"{num - len(bad)}/{num} draft-step logits match a cache-free recompute (rtol {rtol:g}, "
                  f"x (1 + step) along an EAGLE/MTP chain")
    detail += f"; two runs, one with forced preemption: {preempted} preemptions)" if preemption else ")"
    detail += scenario
    if coverage is not None and coverage.note:
        detail += f"; {coverage.note}"
    if bad:
        kinds = ", ".join(f"{k}: {c}" for k, c in sorted(by_kind.items()))
        detail += f"; mismatches by {'kind' if setup.draft_shape.is_tree else 'step'} ({kinds}); first: {bad[0]}"
    return CheckResult("oracle", not bad and num > 0, detail, time.perf_counter() - start)
