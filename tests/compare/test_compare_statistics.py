"""The statistics under the verdicts: exact weighted percentiles, the sign test, estimators that reproduce the
stored cell metrics, and paired outcomes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tests.support.compare_fixtures import RunSpec, write_run
from specbench.compare.bootstrap import RepeatReplicates, combine_repeats, percentile_interval
from specbench.compare.cell_estimates import RunEstimates
from specbench.compare.draws import identity_draw, makespan, random_draw
from specbench.compare.loading import load_run
from specbench.compare.matching import cell_ids_by_key
from specbench.compare.metrics_catalog import SPEEDUP, Delta, Resampling, catalog
from specbench.compare.noise import run_evidence, smallest_discordance
from specbench.compare.paired import paired_compare, sign_test
from specbench.compare.request_sample import RequestSample
from specbench.compare.weighted_quantile import weighted_quantile

# cells.parquet column of each catalog metric (the table's own names differ for latencies)
STORED = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2e": "e2e_s"}


def _stored_column(name: str) -> str:
    head, _, stat = name.rpartition("_")
    if head in STORED:
        return f"{STORED[head]}_{stat}"
    if name.startswith("accept_pos_"):
        return f"accept_rate_pos_{name.removeprefix('accept_pos_')}"
    return name


@pytest.mark.parametrize("block_size", [None, 1, 7, 64])  # None: one block (direct); else the two-stage search
@pytest.mark.parametrize("q", [0.0, 0.5, 0.9, 0.99, 1.0])
def test_weighted_quantile_is_numpy_percentile_of_the_expanded_sample(q, block_size):
    rng = np.random.default_rng(3)
    owner = rng.integers(0, 7, size=60)
    values = rng.lognormal(size=60)
    values[:5] = values[5]  # ties
    counts = rng.multinomial(7, np.full(7, 1 / 7), size=40)
    counts[0] = 0  # an empty resample
    got = weighted_quantile(values, owner, counts, q, block_size=block_size)
    assert np.isnan(got[0])
    for b in range(1, 40):
        expanded = np.repeat(values, counts[b, owner])
        expected = np.percentile(expanded, 100 * q) if expanded.size else np.nan
        assert got[b] == pytest.approx(expected, rel=1e-12, nan_ok=True)


def test_sign_test_is_the_exact_binomial_test():
    assert sign_test(0, 0) == 1.0 and sign_test(0, 1) == 1.0 and sign_test(5, 5) == 1.0
    assert sign_test(0, 12) == pytest.approx(2 / 2**12)
    assert sign_test(9, 3) == sign_test(3, 9) == pytest.approx(2 * (1 + 12 + 66 + 220) / 2**12)
    # Against the two-sided test by definition: outcomes at most as likely as the observed one, under p = 1/2.
    n, k = 71, 40
    pmf = np.array([math.comb(n, i) for i in range(n + 1)], dtype=float) / 2**n
    assert sign_test(k, n - k) == pytest.approx(pmf[pmf <= pmf[k] * (1 + 1e-12)].sum(), rel=1e-9)


def test_paired_compare_counts_discordant_questions():
    index = pd.MultiIndex.from_tuples([(str(i), 0) for i in range(10)])
    before = pd.Series([1, 1, 1, 1, 0, 0, 0, 1, 1, 0], index=index, dtype=float)
    after = pd.Series([1, 0, 0, 0, 0, 0, 1, 1, 1, 0], index=index, dtype=float)
    result = paired_compare(before, after.iloc[::-1], 2000, np.random.default_rng(0))  # order does not matter
    assert (result.num_pairs, result.num_better, result.num_worse) == (10, 1, 3)
    assert result.p_value == pytest.approx(0.625)
    assert np.mean(result.replicates) == pytest.approx(-0.2, abs=0.02)


def test_estimators_reproduce_the_stored_cell_metrics(tmp_path):
    spec = RunSpec("r", num_steps=(0, 3), repeats=2, temperatures=(0.0, 1.0), goodput="tpot:15")
    run = load_run(write_run(tmp_path, "r", spec))
    estimates = RunEstimates(run, "before", 200, 0)
    cells = run.cells.set_index("cell_id")
    checked = 0
    for key, repeats in cell_ids_by_key(run.cells).items():
        for metric in catalog(3) + (SPEEDUP,):
            if metric.needs_drafts and key.num_steps == 0:
                continue
            stored = cells.loc[list(repeats.values()), _stored_column(metric.name)].astype(float).mean()
            if metric.resampling is Resampling.PAIRED:
                value, _ = estimates.outcomes(metric, key)
            elif metric.resampling is Resampling.ROUNDS:  # the point pools the repeats' requests; each repeat's own
                points = estimates.estimate(metric, key).repeat_points
                value = None if np.isnan(points).all() else float(np.nanmean(points))
            else:
                value = estimates.estimate(metric, key).point
            if metric.group == "tree":  # chains: N/A in the cells and in compare alike
                assert value is None and np.isnan(stored), (key, metric.name)
                continue
            assert value == pytest.approx(stored, rel=1e-9), (key, metric.name)
            checked += 1
    assert checked > 150


def test_repeat_level_resampling_and_intervals():
    rng = np.random.default_rng(0)
    flat = [RepeatReplicates(1.0, np.full(1000, 1.0), 10), RepeatReplicates(3.0, np.full(1000, 3.0), 10)]
    estimate = combine_repeats(flat, rng)
    assert estimate.point == 2.0 and estimate.num_repeats == 2
    # Drawing 2 of {1, 3} with replacement: means 1, 2 or 3 in proportion 1:2:1.
    assert set(np.unique(estimate.replicates)) == {1.0, 2.0, 3.0}
    assert np.mean(estimate.replicates == 2.0) == pytest.approx(0.5, abs=0.05)
    few = combine_repeats([RepeatReplicates(1.0, np.full(1000, 1.0), 4)], rng)
    assert few.point == 1.0 and few.replicates is None  # too few requests for an interval
    interval = percentile_interval(np.arange(1001, dtype=float), 0.9)
    assert (interval.low, interval.high) == pytest.approx((50.0, 950.0))
    assert percentile_interval(np.full(10, math.nan), 0.95) is None


def test_schedule_replay_makespan():
    service = np.array([[3.0, 1.0, 2.0, 4.0]])
    at_once = np.zeros(4)
    assert makespan(service, at_once, 1)[0] == 10.0  # one slot: back to back
    assert makespan(service, at_once, 8)[0] == 4.0  # one wave: the slowest request
    assert makespan(service, at_once, 2)[0] == 7.0  # slots: 3 | 1 -> 3rd on slot 2 (1..3), 4th at 3 (3..7)
    released = np.array([0.0, 0.0, 10.0, 10.0])
    assert makespan(service, released, 4)[0] == 14.0  # the last two wait for their release


def test_draw_windows_keep_the_tail_of_a_single_wave(tmp_path):
    """One wave (concurrency = requests): the window is the slowest request, so a draw that leaves it out is
    shorter; with many waves the window tracks the total service time."""
    run = load_run(write_run(tmp_path, "r", RunSpec("r", concurrencies=(1, 40), num_steps=(0,), noise=0.3)))
    for concurrency in (1, 40):
        requests = run.requests[run.requests["concurrency"] == concurrency]
        sample = RequestSample.of(requests)
        draw = random_draw(sample, 500, np.random.default_rng(0))
        assert identity_draw(sample).window_s[0] == pytest.approx(sample.window_s)
        drawn_busy = draw.counts @ sample.busy_s
        if concurrency == 1:
            assert np.allclose(draw.window_s / sample.window_s, drawn_busy / sample.busy_s.sum(), rtol=1e-6)
        else:
            slowest = sample.busy_s.max()
            expected = np.array([sample.busy_s[row].max() for row in draw.indices]) / slowest * sample.window_s
            assert np.allclose(draw.window_s, expected) and (draw.window_s < sample.window_s).any()


def test_run_interval_is_the_pooled_t_test():
    """Absolute deltas: the interval excludes 0 exactly when Student's two-sample t test rejects; relative deltas:
    the same test on the logs (the interval is exp of the log-ratio interval, minus 1); one repeat or no spread: no
    interval."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        before, after = rng.normal(10, 1, rng.integers(2, 6)), rng.normal(10.8, 1, rng.integers(2, 6))
        evidence = run_evidence(before, after, Delta.ABSOLUTE, 0.95)
        p = stats.ttest_ind(after, before, equal_var=True).pvalue
        assert (evidence.interval.low > 0 or evidence.interval.high < 0) == (p < 0.05)
        assert evidence.mde == pytest.approx((evidence.interval.high - evidence.interval.low) / 2)
        relative = run_evidence(before, after, Delta.RELATIVE, 0.95)
        log_p = stats.ttest_ind(np.log(after), np.log(before), equal_var=True).pvalue
        assert (relative.interval.low > 0 or relative.interval.high < 0) == (log_p < 0.05)
        ratio = np.exp(np.log(after).mean() - np.log(before).mean())  # of the geometric means
        assert relative.interval.low < ratio - 1 < relative.interval.high and relative.interval.low > -1
    assert run_evidence([1.0], [1.0, 2.0], Delta.RELATIVE, 0.95).interval is None
    flat = run_evidence([3.0, 3.0], [4.0, 4.0], Delta.RELATIVE, 0.95)
    assert flat.interval is None and flat.spread == 0
    assert smallest_discordance(8, 0.95) == 3 and smallest_discordance(40, 0.95) == 4
