"""Check 3, draft oracle: every recorded draft-step logit vs a cache-free recomputation on the same prefix.

Draft LM: one fresh prefill (new KV, positions 0..n-1) over the committed tokens plus the drafts fed
so far; its last row must match the step's logits. All steps of one round share a prefix, so one
forward per round serves all of them. EAGLE / EAGLE-3 / MTP (the MTP module drafts as an EAGLE-1-shaped head):
see `eagle_oracle` (the head's chain over target features it recomputes from the committed tokens with a cache-free
target forward). This catches position, metadata, KV-slice, catch-up, phase-leak and feature-row bugs that never
change greedy output.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from specbench.check.eagle_oracle import compare_eagle_records
from specbench.check.fresh_forward import fresh_sequence
from specbench.check.greedy import greedy_params
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, forced_preemption_overrides, num_preemptions, prompt_list
from specbench.llm import LLM
from specbench.speculation.capabilities import ConsumesTargetFeatures, RecordsDraftLogits
from specbench.speculation.draft_records import DraftRecorder, group_rounds
from specbench.speculation.registry import methods_with

FP32_RTOL = 1e-4  # of the logits' max magnitude
BF16_RTOL = 3e-2


@torch.inference_mode()
def recompute_draft_logits(proposer, token_ids: tuple[int, ...]) -> torch.Tensor:
    """[len(token_ids), vocab] float32 logits of the draft LM over token_ids with a fresh, private KV cache."""
    md, kv = fresh_sequence(proposer.model.kv_cache_spec(), len(token_ids), proposer.block_size, proposer.device)
    ids = torch.tensor(token_ids, dtype=torch.int64, device=proposer.device)
    out = proposer.model(ids, md, kv, phase="oracle")
    return proposer.model.compute_logits(out.hidden_states).float().cpu()


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


def record_and_compare(llm: LLM, reference: LLM, prompts: list, params, rtol: float) -> tuple[int, list[str]]:
    """Generate with a recorder attached, then compare every recorded draft step with its cache-free recompute
    ((records compared, mismatch descriptions)) by `reference`'s models: the same method and weights under the
    reference settings (check/reference.py), never the engine's own. EAGLE recomputes the target features too,
    from the committed tokens, with the reference target."""
    proposer = llm.engine.proposer
    assert isinstance(proposer, RecordsDraftLogits), "check_oracle runs only methods whose drafts it can record"
    recorder = DraftRecorder()
    proposer.attach_recorder(recorder)
    llm.generate(prompts, params)
    proposer.attach_recorder(None)
    if isinstance(reference.engine.proposer, ConsumesTargetFeatures):  # the head's chain over recomputed features
        return compare_eagle_records(reference.engine.proposer, reference.engine.runner.model, recorder.steps, rtol)
    return compare_records(reference.engine.proposer, recorder.steps, rtol)


def check_oracle(setup: CheckSetup, preemption: bool = True) -> CheckResult:
    start = time.perf_counter()
    if setup.engine.method not in methods_with(RecordsDraftLogits):
        return CheckResult("oracle", True, f"no draft oracle for method {setup.engine.method!r} (no draft model)",
                           time.perf_counter() - start, skipped=True)
    if setup.draft_shape.is_tree:
        return CheckResult("oracle", True, "the draft oracle records chain rounds only: tree rounds' draft steps "
                           "(frontier batches over tree rows) have no cache-free recompute yet",
                           time.perf_counter() - start, skipped=True)
    rtol = FP32_RTOL if setup.engine.dtype == "fp32" else BF16_RTOL
    num, bad, preempted = 0, [], 0
    runs = ({}, forced_preemption_overrides(setup)) if preemption else ({},)  # as configured, then preempting
    reference = build_reference_drafting_llm(setup.engine)
    for overrides in runs:
        llm = build_llm(setup, **overrides)
        run_num, run_bad = record_and_compare(llm, reference, prompt_list(setup), greedy_params(setup), rtol)
        num, bad = num + run_num, bad + [f"{line}{' (preempting run)' if overrides else ''}" for line in run_bad]
        preempted += num_preemptions(llm)
    by_step: dict[int, int] = defaultdict(int)
    for line in bad:
        by_step[int(line.split(" step ")[1].split()[0])] += 1
    detail = (f"{num - len(bad)}/{num} draft-step logits match a cache-free recompute (rtol {rtol:g}, "
              f"x (1 + step) along an EAGLE/MTP chain")
    detail += f"; two runs, one with forced preemption: {preempted} preemptions)" if preemption else ")"
    if bad:
        steps = ", ".join(f"step {s}: {c}" for s, c in sorted(by_step.items()))
        detail += f"; mismatches by step ({steps}); first: {bad[0]}"
    return CheckResult("oracle", not bad and num > 0, detail, time.perf_counter() - start)
