"""Check 2, lossless sampled: per-position token histograms with and without speculation agree (chi-square).

For a few prompts, many seeded samples of the first `num_positions` tokens at temperature 1 are drawn
from the speculative engine and from clean plain decoding (independent seeds). Each (prompt, position)
gets a two-sample chi-square test (tokens rarer than 5 pooled counts merged); the smallest p-value is
Bonferroni-corrected. Power is stated against moving 0.1 of probability mass between the two most
likely tokens of the pooled histogram (noncentral chi-square approximation).
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
from scipy import stats

from specbench.check.result import CheckResult
from specbench.check.setup import CheckSetup, build_llm, prompt_list
from specbench.sampling_params import SamplingParams

ALPHA = 0.01
EFFECT_MASS = 0.1


def _histograms(llm, prompts, num_samples: int, num_positions: int, seed: int) -> list[list[Counter]]:
    batch = [p for p in prompts for _ in range(num_samples)]
    params = [SamplingParams(temperature=1.0, max_tokens=num_positions, ignore_eos=True, seed=seed + i)
              for i in range(len(batch))]
    outs = llm.generate(batch, params)
    hists = [[Counter() for _ in range(num_positions)] for _ in prompts]
    for i, out in enumerate(outs):
        for pos, token in enumerate(out.output_token_ids[:num_positions]):
            hists[i // num_samples][pos][token] += 1
    return hists


def two_sample_chi2(a: Counter, b: Counter) -> tuple[float, int, np.ndarray, np.ndarray]:
    """(p-value, dof, merged counts a, merged counts b)."""
    tokens = sorted(set(a) | set(b), key=lambda t: -(a[t] + b[t]))
    x = np.array([a[t] for t in tokens], float)
    y = np.array([b[t] for t in tokens], float)
    big = (x + y) >= 5
    x = np.append(x[big], x[~big].sum())
    y = np.append(y[big], y[~big].sum())
    keep = (x + y) > 0
    x, y = x[keep], y[keep]
    if len(x) < 2:
        return 1.0, 0, x, y
    _, p, dof, _ = stats.chi2_contingency(np.stack([x, y]))
    return float(p), int(dof), x, y


def power_against_shift(x: np.ndarray, y: np.ndarray, dof: int, alpha: float) -> float:
    n = min(x.sum(), y.sum())
    p = (x + y) / (x + y).sum()
    q = p.copy()
    move = min(EFFECT_MASS, p[0])
    q[0] -= move
    q[1 if len(q) > 1 else 0] += move
    nonzero = (p + q) > 0
    lam = n * float((((p - q) ** 2)[nonzero] / (p + q)[nonzero]).sum())
    critical = stats.chi2.ppf(1 - alpha, dof)
    return float(stats.ncx2.sf(critical, dof, lam)) if dof > 0 else 0.0


def check_sampled(setup: CheckSetup, num_prompts: int = 2, num_samples: int = 300, num_positions: int = 3) -> CheckResult:
    start = time.perf_counter()
    prompts = prompt_list(setup)[:num_prompts]
    spec = _histograms(build_llm(setup, max_concurrency=64), prompts, num_samples, num_positions, seed=1)
    plain = _histograms(build_llm(setup, speculative=False, max_concurrency=64), prompts, num_samples,
                        num_positions, seed=10_000_019)
    tests = [two_sample_chi2(s, p) for sh, ph in zip(spec, plain) for s, p in zip(sh, ph)]
    alpha = ALPHA / len(tests)
    worst = min(range(len(tests)), key=lambda i: tests[i][0])
    p_min = tests[worst][0]
    p_adj = min(1.0, p_min * len(tests))
    powers = [power_against_shift(x, y, dof, alpha) for _, dof, x, y in tests]
    prompt_i, pos = divmod(worst, num_positions)
    detail = (f"{len(tests)} chi-square tests ({num_prompts} prompts x {num_positions} positions, {num_samples} samples "
              f"each side, T=1): min p {p_min:.2g} (prompt {prompt_i}, position {pos}), Bonferroni p {p_adj:.2g}, "
              f"alpha {ALPHA}; power vs a {EFFECT_MASS} mass shift: median {np.median(powers):.2f}")
    return CheckResult("sampled", p_adj >= ALPHA, detail, time.perf_counter() - start)
