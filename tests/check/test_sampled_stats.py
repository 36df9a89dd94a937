"""The sampled check's statistics on simulated cells: calibrated under the null, and the power it states holds.

Each cell's samples draw from their own distributions (as later positions do, conditioned on differing
prefixes), so the test is exercised exactly as the check uses it, without an engine.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from specbench.check.sampled_stats import category_of, category_probs, cell_test, choose_categories, combine

NUM_CELLS, NUM_SAMPLES, VOCAB = 12, 300, 40


def _cell_distributions(rng: np.random.Generator) -> np.ndarray:
    """[NUM_CELLS, NUM_SAMPLES, VOCAB]: per cell a base distribution, jittered per sample."""
    base = rng.normal(0.0, 1.5, (NUM_CELLS, 1, VOCAB))
    base[:, :, 0] += 3.0  # a clear favourite, so moving 0.1 of its mass is possible for every sample
    logits = base + rng.normal(0.0, 0.5, (NUM_CELLS, NUM_SAMPLES, VOCAB))
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return probs / probs.sum(-1, keepdims=True)


def _draw(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """probs: [..., VOCAB] -> [...] one token per distribution."""
    u = rng.random(probs.shape[:-1] + (1,))
    return np.minimum((probs.cumsum(-1) < u).sum(-1), VOCAB - 1)


def _verdict(probs: np.ndarray, tokens: np.ndarray, alpha: float):
    cells = []
    for c in range(NUM_CELLS):
        own = choose_categories(probs[c].sum(0))
        cells.append(cell_test(category_probs(probs[c], own), category_of(tokens[c], own)))
    return combine(cells, alpha, local_shift=0.1, diffuse_shift=0.03)  # the shifts the tests below apply


def _shift_top_mass(probs: np.ndarray, cell: int, shift: float) -> np.ndarray:
    """Move `shift` of the cell's most expected token's mass to its second, in every sample of the cell."""
    moved = probs.copy()
    top, second = np.argsort(-probs[cell].sum(0))[:2]
    amount = np.minimum(shift, moved[cell, :, top])
    moved[cell, :, top] -= amount
    moved[cell, :, second] += amount
    return moved


def test_categories_have_enough_expected_count_and_cover_the_rest():
    assert list(choose_categories(np.array([100.0, 50.0, 6.0, 4.0, 0.5, 0.5]))) == [0, 1, 2]  # rest 5: enough
    own = choose_categories(np.array([100.0, 50.0, 6.0, 3.0, 0.5, 0.5]))
    assert list(own) == [0, 1]  # a rest of 4 is too little: token 2 joins it
    probs = np.array([[0.5, 0.3, 0.1, 0.05, 0.03, 0.02]])
    assert np.allclose(category_probs(probs, own), [[0.5, 0.3, 0.2]])
    assert list(category_of(np.array([1, 0, 5]), own)) == [1, 0, 2]


def test_null_is_calibrated():
    rng = np.random.default_rng(0)
    probs = _cell_distributions(rng)
    pooled, combined = [], []
    for _ in range(300):
        v = _verdict(probs, _draw(probs, rng), alpha=0.05)
        pooled.append(v.pooled_p)
        combined.append(v.p_value)
    assert stats.kstest(pooled, "uniform").pvalue > 0.01
    assert np.mean(np.array(combined) < 0.05) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 300)


def test_stated_power_holds_against_a_shift_at_one_cell():
    rng = np.random.default_rng(1)
    alpha, shifted_cell = 0.01, 3
    probs = _cell_distributions(rng)
    shifted = _shift_top_mass(probs, shifted_cell, 0.1)
    rejected, stated = [], []
    for _ in range(200):
        tokens = _draw(shifted, rng)
        v = _verdict(probs, tokens, alpha)  # tested against the unshifted (claimed) distributions
        rejected.append(v.p_value < alpha)
        stated.append(v.power_local[shifted_cell])
    empirical, claimed = float(np.mean(rejected)), float(np.mean(stated))
    print(f"one cell: empirical power {empirical:.3f}, stated {claimed:.3f}")
    assert 0.5 < claimed < 0.99, claimed  # an alternative near the edge, where a wrong power formula would show
    assert empirical >= claimed - 0.08, (empirical, claimed)


def test_stated_power_holds_against_a_shift_at_every_cell():
    rng = np.random.default_rng(2)
    alpha, shift = 0.01, 0.03
    probs = _cell_distributions(rng)
    shifted = probs
    for c in range(NUM_CELLS):
        shifted = _shift_top_mass(shifted, c, shift)
    rejected, stated = [], []
    for _ in range(200):
        v = _verdict(probs, _draw(shifted, rng), alpha)
        rejected.append(v.p_value < alpha)
        stated.append(v.power_diffuse)
    empirical, claimed = float(np.mean(rejected)), float(np.mean(stated))
    print(f"every cell: empirical power {empirical:.3f}, stated {claimed:.3f}")
    assert 0.3 < claimed < 0.99, claimed
    assert empirical >= claimed - 0.08, (empirical, claimed)
