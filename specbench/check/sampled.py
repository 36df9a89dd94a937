"""Check 2, lossless sampled: tokens sampled with speculation fit the distributions the target gives them by
teacher forcing (a clean plain engine), one chi-square cell per (prompt, position); see sampled_stats.py.

Two engine runs at T < 1 with top-k and top-p (so a warping bug on either side changes the law): the setup's own
drafter (accepted and recovered rows mixed) with a KV pool small enough that requests are preempted and recomputed
mid-sampling, and forced full acceptance, the target drafting for itself (draft LM
= target: p = q at every draft row, so every draft is accepted), whose bonus positions are tested on their own.
The per-row-type test with a stated power vs a 0.02 TV shift is the `rows` check (no engine needed there).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from specbench.check.result import CheckResult
from specbench.check.sampled_stats import (
    CellTest, SampledVerdict, category_of, category_probs, cell_test, choose_categories, combine,
)
from specbench.check.reference import build_reference_llm
from specbench.check.setup import (CheckSetup, build_llm, forced_preemption_overrides, preemption_coverage,
                                   prompt_list)
from specbench.check.target_probs import next_token_probs
from specbench.faults import resolve_fault
from specbench.metrics import definitions
from specbench.sampling_params import SamplingParams
from specbench.speculation.draft_shape import CHAIN

# 0.001: the clean engine must pass on every seed a user tries (30 clean seeds at 0.01 gave 2 false alarms, p 0.004
# and 0.001, both chance: 1000 samples of the same seeds pass); the mutants it catches score p < 1e-4.
ALPHA = 0.001
LOCAL_SHIFT = 0.1  # mass moved between the two likeliest tokens at one (prompt, position)
DIFFUSE_SHIFT = 0.03  # ... at every (prompt, position)
CACHE_BYTES = 1 << 28  # probabilities up to this size are computed once, else recomputed for the second pass
SEED_STRIDE = 1_000_003  # sample seeds of setup seed s: s * SEED_STRIDE + 1 + i, disjoint across setups


SAMPLED_PARAMS = SamplingParams(temperature=0.8, top_k=40, top_p=0.95, ignore_eos=True)
SELF_DRAFT_MIN_ACCEPTANCE = {"fp32": 0.999, "bf16": 0.95}  # p = q up to rounding: only rounding rejects


def _sample(setup: CheckSetup, prompts: list, num_samples: int, params: SamplingParams, salt: int = 0,
            preempting: bool = False, tokenizer=None):
    """One wave (fewest steps) of num_samples seeded requests per prompt; `preempting`: with a KV pool that admits
    the wave's prompts but not their growth, so requests are preempted and recomputed mid-sampling (`tokenizer`, the
    engine's, sizes text prompts). Returns (outputs, whether it preempted: None unless preempting)."""
    batch = [p for p in prompts for _ in range(num_samples)]
    base = setup.engine.seed * SEED_STRIDE + 1 + salt * len(batch)
    per_request = [replace(params, seed=base + i) for i in range(len(batch))]
    wave = replace(setup, prompts=tuple(batch), max_tokens=params.max_tokens).with_engine(max_concurrency=len(batch))
    overrides = forced_preemption_overrides(wave, tokenizer) if preempting else {}
    llm = build_llm(setup, max_concurrency=len(batch), **overrides)
    outs = llm.generate(batch, per_request)
    return outs, preemption_coverage(llm) if preempting else None


def _cell_tests(chunks, tokens: np.ndarray, num_prompts: int, num_samples: int) -> list[CellTest]:
    """chunks(): iterable of [rows, P, vocab] probabilities in row order (called twice: categories need a cell's
    expected counts first); tokens: [num_prompts * num_samples, P]. Cells in (prompt, position) order."""
    num_positions = tokens.shape[1]
    prompt_of_row = np.repeat(np.arange(num_prompts), num_samples)  # [num_rows]
    expected = None  # [num_prompts, P, vocab]
    row = 0
    for chunk in chunks():
        if expected is None:
            expected = np.zeros((num_prompts, num_positions, chunk.shape[2]))
        np.add.at(expected, prompt_of_row[row : row + len(chunk)], chunk.double().numpy())
        row += len(chunk)
    own = [[choose_categories(expected[i, t]) for t in range(num_positions)] for i in range(num_prompts)]
    probs: list[list[list[np.ndarray]]] = [[[] for _ in range(num_positions)] for _ in range(num_prompts)]
    row = 0
    for chunk in chunks():
        owner = prompt_of_row[row : row + len(chunk)]
        for i in np.unique(owner):
            mine = chunk.numpy()[owner == i]  # [rows of prompt i, P, vocab]
            for t in range(num_positions):
                probs[i][t].append(category_probs(mine[:, t], own[i][t]))
        row += len(chunk)
    return [cell_test(np.concatenate(probs[i][t]), category_of(tokens[prompt_of_row == i, t], own[i][t]))
            for i in range(num_prompts) for t in range(num_positions)]


def _verdict(setup: CheckSetup, model, outs, num_prompts: int, num_samples: int, params: SamplingParams,
             positions: tuple[int, ...]) -> SampledVerdict:
    """Cells at `positions` of the outputs vs the teacher-forced laws of `model` (the clean target)."""
    num_positions = max(positions) + 1
    tokens = np.array([o.output_token_ids[:num_positions] for o in outs])  # [num_prompts * num_samples, P]

    def chunks():
        for chunk in next_token_probs(model, [o.prompt_token_ids for o in outs], [tuple(t) for t in tokens], params,
                                      block_size=setup.engine.block_size):
            yield chunk[:, list(positions)]

    picked = tokens[:, list(positions)]
    if len(outs) * len(positions) * model.config.vocab_size * 4 <= CACHE_BYTES:
        kept = list(chunks())  # small enough to keep: one forward serves both passes
        cells = _cell_tests(lambda: kept, picked, num_prompts, num_samples)
    else:
        cells = _cell_tests(chunks, picked, num_prompts, num_samples)
    return combine(cells, ALPHA, LOCAL_SHIFT, DIFFUSE_SHIFT)


def _describe(v: SampledVerdict, positions: tuple[int, ...]) -> str:
    median_power, min_power = v.power_local_summary
    prompt_i, pos = divmod(v.worst_cell, len(positions))
    return (f"{v.num_cells} cells: p {v.p_value:.3g} (pooled chi2 {v.pooled_statistic:.0f} on {v.pooled_dof} dof, "
            f"p {v.pooled_p:.2g}; worst cell prompt {prompt_i} position {positions[pos]}, p {v.worst_cell_p:.2g}); "
            f"power {median_power:.2f} (min {min_power:.2f}) vs {LOCAL_SHIFT} mass moved at one cell, "
            f"{v.power_diffuse:.2f} vs {DIFFUSE_SHIFT} at every cell")


def self_draft_setup(setup: CheckSetup) -> CheckSetup:
    """The target drafting for itself with the setup's engine options. It keeps the setup's fault when that fault
    lives where this run exercises it: anywhere for a draft-LM setup, outside the drafter for other methods. Always
    chains: a tree's children are the draft's top-k, not draws from it, so p = q does not get them all accepted (the
    setup's tree rounds are the first run's)."""
    fault = resolve_fault(setup.inject)
    keep = fault is not None and "draft" in fault.methods and (setup.engine.method == "draft" or fault.layer != "draft")
    chain = replace(setup, draft_shape=CHAIN)
    return chain.with_engine(method="draft", draft=setup.engine.target).with_inject(setup.inject if keep else None)


_SELF_DRAFT_RUNS: dict[str, tuple[int, int, SampledVerdict]] = {}  # repr of the run's inputs -> its outcome


def _self_draft_run(setup: CheckSetup, model, prompts: list, num_samples: int, params: SamplingParams,
                    positions: tuple[int, ...]) -> tuple[int, int, SampledVerdict]:
    """(accepted, drafted, verdict at `positions`) of the forced-full-acceptance run: a pure function of its inputs
    (seeded), so setups that reduce to the same run (every method's clean setup on one target) share it."""
    key = repr((setup, prompts, num_samples, params, positions))
    if key not in _SELF_DRAFT_RUNS:
        outs, _ = _sample(setup, prompts, num_samples, params, salt=1)
        drafted = sum(sum(o.stats.num_drafted_per_pos) for o in outs)
        accepted = sum(sum(o.stats.num_accepted_per_pos) for o in outs)
        if len(_SELF_DRAFT_RUNS) > 64:  # bounded: a long selftest keeps only recent runs
            _SELF_DRAFT_RUNS.clear()
        _SELF_DRAFT_RUNS[key] = (accepted, drafted, _verdict(setup, model, outs, len(prompts), num_samples, params,
                                                             positions))
    return _SELF_DRAFT_RUNS[key]


def check_sampled(setup: CheckSetup, num_prompts: int = 2, num_samples: int = 200, num_positions: int = 6,
                  params: SamplingParams = SAMPLED_PARAMS, engine_runs: bool = True) -> CheckResult:
    """Seeded samples of the first num_prompts prompts; independent across setup seeds. Powers are stated against
    moving mass between a cell's two likeliest tokens."""
    start = time.perf_counter()
    if not engine_runs:
        return CheckResult("sampled", True, "engine runs skipped by the budget (the rows check still tests the "
                           "verifier's row types)", time.perf_counter() - start, skipped=True)
    prompts = prompt_list(setup)[:num_prompts]
    run = replace(params, max_tokens=num_positions)
    reference = build_reference_llm(setup.engine)  # the reference target (check/reference.py)
    model = reference.engine.runner.model
    outs, coverage = _sample(setup, prompts, num_samples, run, preempting=True, tokenizer=reference.tokenizer)
    num_preempted = sum(o.stats.num_preemptions for o in outs)
    mixed_positions = tuple(range(num_positions))
    mixed = _verdict(setup, model, outs, len(prompts), num_samples, run, mixed_positions)

    if model.config.is_hybrid:  # a hybrid target cannot draft for itself (no draft LM keeps recurrent state)
        passed = mixed.p_value >= ALPHA
        detail = (f"T={params.temperature:g} top-k {params.top_k} top-p {params.top_p:g}, {len(prompts)} prompts x "
                  f"{num_samples} samples, vs the target's exact conditionals, alpha {ALPHA}: p {mixed.p_value:.3g}. "
                  f"{setup.engine.method} drafts with forced preemption ({num_preempted} preemptions), positions "
                  f"0-{num_positions - 1}: {_describe(mixed, mixed_positions)}. No forced-full-acceptance run: a "
                  "hybrid target cannot be its own draft LM")
        return CheckResult("sampled", passed, detail, time.perf_counter() - start, note=f"p={mixed.p_value:.2f}")
    # prefill emits position 0; round 1 drafts 1..k, its bonus is k + 1
    bonus_positions = (setup.engine.max_num_steps + 1,)
    bonus_run = replace(params, max_tokens=setup.engine.max_num_steps + 2)
    accepted, drafted, bonus = _self_draft_run(self_draft_setup(setup), model, prompts, num_samples, bonus_run,
                                               bonus_positions)
    acceptance = definitions.acceptance_rate(accepted, max(drafted, 1))
    min_acceptance = SELF_DRAFT_MIN_ACCEPTANCE.get(setup.engine.dtype, SELF_DRAFT_MIN_ACCEPTANCE["bf16"])

    p_value = min(1.0, 2 * min(mixed.p_value, bonus.p_value))  # Bonferroni over the two runs
    passed = p_value >= ALPHA and acceptance >= min_acceptance
    detail = (f"T={params.temperature:g} top-k {params.top_k} top-p {params.top_p:g}, {len(prompts)} prompts x "
              f"{num_samples} samples, vs the target's exact conditionals, alpha {ALPHA} (Bonferroni over 2 runs): "
              f"p {p_value:.3g}. {setup.engine.method} drafts ({setup.draft_shape.label()}) with forced preemption "
              f"({num_preempted} preemptions{'; ' + coverage.note if coverage.note else ''}), positions "
              f"0-{num_positions - 1}: {_describe(mixed, mixed_positions)}. "
              f"Forced full acceptance (target drafts for itself"
              f"{', as chains' if setup.draft_shape.is_tree else ''}): {accepted}/{drafted} drafts accepted (needs >= "
              f"{min_acceptance}); bonus rows alone at position {bonus_positions[0]}: {_describe(bonus, bonus_positions)}")
    median_power, _ = mixed.power_local_summary
    note = f"p={p_value:.2f} pw={median_power:.2f}" + ("" if acceptance >= min_acceptance else f" acc={acceptance:.2f}")
    return CheckResult("sampled", passed, detail, time.perf_counter() - start, note=note)
