"""Check 2, lossless sampled: tokens sampled with speculation fit the distributions the target gives them by
teacher forcing (a clean plain engine), one chi-square cell per (prompt, position); see sampled_stats.py.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from specbench.check.result import CheckResult
from specbench.check.sampled_stats import (
    CellTest, category_of, category_probs, cell_test, choose_categories, combine,
)
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.check.target_probs import next_token_probs
from specbench.sampling_params import SamplingParams

ALPHA = 0.01
LOCAL_SHIFT = 0.1  # mass moved between the two likeliest tokens at one (prompt, position)
DIFFUSE_SHIFT = 0.03  # ... at every (prompt, position)
CACHE_BYTES = 1 << 28  # probabilities up to this size are computed once, else recomputed for the second pass
SEED_STRIDE = 1_000_003  # sample seeds of setup seed s: s * SEED_STRIDE + 1 + i, disjoint across setups


def _sample(setup: CheckSetup, prompts: list, num_samples: int, params: SamplingParams):
    batch = [p for p in prompts for _ in range(num_samples)]
    base = setup.seed * SEED_STRIDE + 1
    per_request = [replace(params, seed=base + i) for i in range(len(batch))]
    return build_llm(setup, max_concurrency=len(batch)).generate(batch, per_request)  # one wave: fewest steps


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


def check_sampled(setup: CheckSetup, num_prompts: int = 2, num_samples: int = 300, num_positions: int = 6,
                  temperature: float = 1.0) -> CheckResult:
    """Seeded samples of the first num_positions tokens of the first num_prompts prompts; independent across
    setup seeds. Powers are stated against moving mass between a cell's two likeliest tokens."""
    start = time.perf_counter()
    prompts = prompt_list(setup)[:num_prompts]
    params = SamplingParams(temperature=temperature, max_tokens=num_positions, ignore_eos=True)
    outs = _sample(setup, prompts, num_samples, params)
    tokens = np.array([o.output_token_ids[:num_positions] for o in outs])  # [num_prompts * num_samples, P]
    model = build_llm(setup, speculative=False).engine.runner.model  # clean target, no fault

    def chunks():
        return next_token_probs(model, [o.prompt_token_ids for o in outs], [tuple(t) for t in tokens], params,
                                block_size=setup.block_size, device=setup.device)

    if len(outs) * num_positions * model.config.vocab_size * 4 <= CACHE_BYTES:
        kept = list(chunks())  # small enough to keep: one forward serves both passes
        cells = _cell_tests(lambda: kept, tokens, len(prompts), num_samples)
    else:
        cells = _cell_tests(chunks, tokens, len(prompts), num_samples)
    v = combine(cells, ALPHA, LOCAL_SHIFT, DIFFUSE_SHIFT)
    median_power, min_power = v.power_local_summary
    prompt_i, pos = divmod(v.worst_cell, num_positions)
    detail = (f"{v.num_cells} tested (prompt, position) cells ({len(prompts)} prompts x {num_positions} positions, "
              f"{num_samples} samples, T={temperature:g}) vs the target's exact conditionals: p {v.p_value:.3g} "
              f"(pooled chi2 {v.pooled_statistic:.0f} on {v.pooled_dof} dof, p {v.pooled_p:.2g}; worst cell prompt "
              f"{prompt_i} position {pos}, p {v.worst_cell_p:.2g}), alpha {ALPHA}; power {median_power:.2f} "
              f"(min {min_power:.2f}) vs {LOCAL_SHIFT} mass moved at one cell, {v.power_diffuse:.2f} "
              f"vs {DIFFUSE_SHIFT} at every cell")
    note = f"p={v.p_value:.2f} pw={median_power:.2f}"
    return CheckResult("sampled", v.p_value >= ALPHA, detail, time.perf_counter() - start, note=note)
