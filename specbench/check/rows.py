"""Check: the engine's verifier on hand-built distributions, one goodness-of-fit test per output row type
(accepted, recovered, bonus) at T < 1 with top-k and top-p, each sized to detect a TV_SHIFT total-variation shift
of that row type's distribution at ROWS_ALPHA with power >= ROWS_POWER. No model runs: it calls the verify function
the engine was built with (fault wrappers included) on tensors whose row laws are known (row_batches.py).

The bonus batch's last draft sits on the bonus row's likeliest token, so a verifier that leaves the last draft row's
law in the bonus residual moves that token's whole mass; the detail states the power against exactly that bug at
the batch's size (noncentral chi-square with the null covariance, computed from the batch's own laws)."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy import special

from specbench.check.result import CheckResult
from specbench.check.row_batches import NUM_GROUPS, VOCAB, RowBatch, Warping, accept_batch, bonus_batch
from specbench.check.sampled_stats import category_of, category_probs, cell_test, choose_categories
from specbench.check.setup import CheckSetup
from specbench.faults import wrap_verifier
from specbench.sampling_params import SamplingParams
from specbench.speculation.sampling import build_sampling_tensors

ROWS_ALPHA = 0.001  # per row type
ROWS_POWER = 0.8
TV_SHIFT = 0.02
WARPING = Warping(temperature=0.7, top_k=10, top_p=0.9)
BONUS_NUM_DRAFT = 2


@dataclass(frozen=True)
class RowTypeTest:
    row_type: str  # accepted | recovered | bonus
    num_rows: int
    p_value: float  # 0.0 when a token of probability 0 was emitted
    num_impossible: int  # emitted tokens their row's law gives probability 0
    power: float  # vs a TV_SHIFT total-variation shift of this row type's mean law, at ROWS_ALPHA
    power_vs_residual: float | None = None  # bonus rows: vs the last draft row's law left in the bonus residual


def power_vs_tv(num_rows: int, dof: int, shift: float = TV_SHIFT, alpha: float = ROWS_ALPHA) -> float:
    """Lower bound: a shift of total variation `shift` in the rows' mean law has noncentrality >= 4 n shift^2
    (Cauchy-Schwarz: (sum |d|)^2 <= sum d^2 / p), and per-row laws only shrink the null covariance."""
    if dof < 1:
        return 0.0
    return float(1.0 - special.chndtr(special.chdtri(dof, alpha), dof, 4 * num_rows * shift**2))


def rows_needed(dof: int = VOCAB - 1) -> int:
    n = 1
    while power_vs_tv(n, dof) < ROWS_POWER:
        n *= 2
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_vs_tv(mid, dof) >= ROWS_POWER else (mid, hi)
    return hi


def power_vs_law(dists: np.ndarray, alt_dists: np.ndarray, alpha: float = ROWS_ALPHA) -> float:
    """P(fit_test rejects) when row s's token follows alt_dists[s] instead of dists[s] ([n, V] each): noncentral
    chi-square on fit_test's categories, noncentrality E[D]^T Cov0^-1 E[D] (D the category counts minus their null
    expectation, Cov0 its null covariance)."""
    own = choose_categories(dists.sum(0))
    null, alt = category_probs(dists, own), category_probs(alt_dists, own)
    dof = null.shape[1] - 1
    if dof < 1:
        return 0.0
    shift = (alt.sum(0) - null.sum(0))[:-1]
    cov = (np.diag(null.sum(0)) - null.T @ null)[:-1, :-1]
    noncentrality = float(shift @ np.linalg.pinv(cov, hermitian=True) @ shift)
    return float(1.0 - special.chndtr(special.chdtri(dof, alpha), dof, noncentrality))


def fit_test(row_type: str, dists: np.ndarray, tokens: np.ndarray) -> RowTypeTest:
    """dists: [n, V] each row's law; tokens: [n] emitted."""
    impossible = int((dists[np.arange(len(tokens)), tokens] <= 0).sum())
    own = choose_categories(dists.sum(0))
    cell = cell_test(category_probs(dists, own), category_of(tokens, own))
    p = 0.0 if impossible else cell.p_value
    return RowTypeTest(row_type, len(tokens), p, impossible, power_vs_tv(len(tokens), max(cell.dof, 1)))


def _run(verify_fn, batch: RowBatch, w: Warping, device: torch.device,
         is_deterministic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(output token ids [num_reqs, num_draft + 1], num_accepted [num_reqs]) of the engine's verifier;
    `is_deterministic`: the drafts go without draft probs, as a deterministic drafter's (n-gram) do (the batch's
    drafts must be point masses then, so the laws are the same)."""
    num_reqs, num_draft = batch.draft_token_ids.shape
    params = [SamplingParams(temperature=w.temperature, top_k=w.top_k, top_p=w.top_p)] * num_reqs
    st = build_sampling_tensors(params, [None] * num_reqs, VOCAB, device)
    draft_probs = None if is_deterministic else batch.draft_probs.to(device)
    result = verify_fn(batch.target_logits.to(device), batch.draft_token_ids.to(device),
                       torch.full((num_reqs,), num_draft, dtype=torch.int64), draft_probs, st)
    return result.output_token_ids.cpu().numpy(), result.num_accepted.cpu().numpy()


def row_type_tests(verify_fn, device: torch.device, seed: int, w: Warping = WARPING) -> list[RowTypeTest]:
    rng = np.random.default_rng(seed)
    needed = rows_needed()
    rate = float(accept_batch(NUM_GROUPS, w, rng).accept_mass.mean())  # the groups' acceptance: sizes the batch
    num_reqs = math.ceil(1.15 * needed / min(rate, 1 - rate))
    rng = np.random.default_rng(seed)
    tests = []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        batch = accept_batch(num_reqs, w, rng)
        out, accepted = _run(verify_fn, batch, w, device)
        is_acc = accepted == 1
        tests.append(fit_test("accepted", batch.accepted_dist[is_acc], out[is_acc, 0]))
        tests.append(fit_test("recovered", batch.recovered_dist[~is_acc], out[~is_acc, 0]))
        bonus = bonus_batch(math.ceil(1.05 * needed), BONUS_NUM_DRAFT, w, rng)
        tests.append(_bonus_test("bonus", bonus, *_run(verify_fn, bonus, w, device)))
        # The same point-mass drafts handed over without draft probs, as n-gram's are: a verifier has a separate
        # path for them (a draft row's point mass built from the token id), and its bonus row must remove nothing.
        tests.append(_bonus_test("bonus (no draft probs)", bonus,
                                 *_run(verify_fn, bonus, w, device, is_deterministic=True)))
    return tests


def _bonus_test(row_type: str, bonus: RowBatch, out: np.ndarray, accepted: np.ndarray) -> RowTypeTest:
    if (accepted != BONUS_NUM_DRAFT).any():  # certain drafts rejected
        return RowTypeTest(row_type, int((accepted == BONUS_NUM_DRAFT).sum()), 0.0,
                           int((accepted != BONUS_NUM_DRAFT).sum()), 0.0)
    test = fit_test(row_type, bonus.bonus_dist, out[:, BONUS_NUM_DRAFT])
    power = power_vs_law(bonus.bonus_dist, bonus.residual_bonus_dist)
    return RowTypeTest(row_type, test.num_rows, test.p_value, test.num_impossible, test.power, power)


@functools.lru_cache(maxsize=16)
def _cached_tests(verify_fn, device: torch.device, seed: int) -> tuple[RowTypeTest, ...]:
    """A pure function of the verify function, device and seed: engines sharing the clean verifier share a run."""
    return tuple(row_type_tests(verify_fn, device, seed))


def engine_verify_fn(setup: CheckSetup):
    """The verify function the setup's engine is built with (builder.py's choice), fault wrapper included, and its
    device, without loading a model."""
    from specbench.engine.builder import resolve_device, resolve_kernel_choice, select_verifier

    device = resolve_device(setup.engine.device)
    name = resolve_kernel_choice(setup.engine.verifier, device, "verifier")
    return wrap_verifier(setup.inject, select_verifier(name)), device


def check_rows(setup: CheckSetup) -> CheckResult:
    start = time.perf_counter()
    verify_fn, device = engine_verify_fn(setup)
    if setup.paths is not None:  # the verifier the engine is built with runs here, without an engine
        from specbench.engine.builder import resolve_kernel_choice

        setup.paths.record(f"verify.{resolve_kernel_choice(setup.engine.verifier, device, 'verifier')}")
    tests = _cached_tests(verify_fn, device, setup.engine.seed)
    failed = [t for t in tests if t.p_value < ROWS_ALPHA]
    parts = [f"{t.row_type} {t.num_rows} rows p {t.p_value:.2g} power {t.power:.2f}"
             + ("" if t.power_vs_residual is None else f" (power {t.power_vs_residual:.2f} vs the last draft row's "
                f"law left in the bonus residual: last draft on the bonus row's likeliest token)")
             + (f" ({t.num_impossible} impossible)" if t.num_impossible else "") for t in tests]
    w = WARPING
    detail = (f"verifier rows vs known laws at T={w.temperature:g} top-k {w.top_k} top-p {w.top_p:g}: "
              f"{'; '.join(parts)} (alpha {ROWS_ALPHA:g} each, power vs TV {TV_SHIFT:g} shift of that row type)")
    note = f"p={min(t.p_value for t in tests):.2f} pw={min(t.power for t in tests):.2f}"
    return CheckResult("rows", not failed, detail, time.perf_counter() - start, note=note)
