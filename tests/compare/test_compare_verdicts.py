"""Verdicts on synthetic runs with known differences: real changes are called, noise is not."""

from __future__ import annotations

import pytest

from tests.support.compare_fixtures import RunSpec, write_run
from specbench.compare.comparison import CompareOptions, compare_runs
from specbench.compare.loading import load_run
from specbench.compare.verdict import Verdict


def _compare(tmp_path, before: RunSpec, after: RunSpec, **options):
    runs = load_run(write_run(tmp_path, "before", before)), load_run(write_run(tmp_path, "after", after))
    return compare_runs(*runs, CompareOptions(**{"num_resamples": 500, **options}))


def _rows(comparison, metric: str):
    rows = [r for r in comparison.rows if r.metric.name == metric]
    assert rows, metric
    return rows


def test_twenty_percent_faster_with_low_noise_is_improved(tmp_path):
    comparison = _compare(tmp_path, RunSpec("before"), RunSpec("after", speed=1.2, timing_seed=1))
    for row in _rows(comparison, "output_throughput"):
        assert row.delta == pytest.approx(0.2, abs=0.03)
        assert 0 < row.interval.low <= row.delta <= row.interval.high
        assert row.verdict is Verdict.IMPROVED
    for name in ("tpot_mean", "ttft_p99", "e2e_median"):  # lower is better: a drop is an improvement
        assert {r.verdict for r in _rows(comparison, name)} == {Verdict.IMPROVED}, name
    # Nothing about acceptance or answers changed: those stay within noise.
    for name in ("acceptance_length", "accuracy_flexible", "agreement_flexible"):
        assert {r.verdict for r in _rows(comparison, name)} == {Verdict.WITHIN_NOISE}, name


def test_twenty_percent_slower_is_regressed(tmp_path):
    comparison = _compare(tmp_path, RunSpec("before"), RunSpec("after", speed=1 / 1.2, timing_seed=1),
                          metrics=("output_throughput", "tpot_mean"))
    assert {r.verdict for r in _rows(comparison, "output_throughput")} == {Verdict.REGRESSED}
    assert {r.verdict for r in _rows(comparison, "tpot_mean")} == {Verdict.REGRESSED}


def test_change_inside_the_bootstrap_interval_is_within_noise(tmp_path):
    noisy = dict(noise=0.4, num_steps=(0,))
    comparison = _compare(tmp_path, RunSpec("before", **noisy), RunSpec("after", speed=1.03, timing_seed=1, **noisy),
                          metrics=("throughput",))
    for row in _rows(comparison, "output_throughput"):
        assert row.delta != 0 and row.interval.low < 0 < row.interval.high
        assert row.verdict is Verdict.WITHIN_NOISE
    # The same shift with little noise is beyond it.
    quiet = _compare(tmp_path / "quiet", RunSpec("before", noise=0.005, num_steps=(0,)),
                     RunSpec("after", speed=1.03, timing_seed=1, noise=0.005, num_steps=(0,)), metrics=("throughput",))
    assert {r.verdict for r in _rows(quiet, "output_throughput")} == {Verdict.IMPROVED}


def test_accuracy_drop_on_the_same_questions_is_regressed(tmp_path):
    comparison = _compare(tmp_path, RunSpec("before"), RunSpec("after", is_correct=lambda i: i % 10 < 5),
                          metrics=("accuracy",))
    for row in _rows(comparison, "accuracy_flexible") + _rows(comparison, "accuracy_strict"):
        assert row.before == pytest.approx(0.8) and row.after == pytest.approx(0.5)
        assert row.delta == pytest.approx(-0.3) and row.num_before == 40
        assert row.p_value == pytest.approx(2 * 0.5**12)  # McNemar exact: 12 discordant pairs, all worse
        assert row.interval.high < 0 and row.verdict is Verdict.REGRESSED


def test_small_accuracy_change_is_within_noise(tmp_path):
    # Two questions lost, one gained: p = 1.0 under the sign test.
    after = RunSpec("after", is_correct=lambda i: (i % 10 < 8 and i not in (0, 1)) or i == 9)
    comparison = _compare(tmp_path, RunSpec("before"), after, metrics=("accuracy_flexible",))
    for row in _rows(comparison, "accuracy_flexible"):
        assert row.delta == pytest.approx(-1 / 40) and row.p_value == pytest.approx(1.0)
        assert row.verdict is Verdict.WITHIN_NOISE


def test_acceptance_uses_round_counts(tmp_path):
    spec = dict(num_steps=(0, 3))
    comparison = _compare(tmp_path, RunSpec("before", accept_prob=0.6, **spec),
                          RunSpec("after", accept_prob=0.4, acceptance_seed=1, **spec), metrics=("acceptance",))
    for name in ("acceptance_length", "acceptance_rate", "accept_pos_1", "accept_pos_2", "accept_pos_3"):
        assert {r.verdict for r in _rows(comparison, name)} == {Verdict.REGRESSED}, name
        assert all(r.key.num_steps == 3 for r in _rows(comparison, name))
    emission = [r for r in _rows(comparison, "tokens_per_emission") if r.key.num_steps == 3]
    assert {r.verdict for r in emission} == {Verdict.REGRESSED}
    same = _compare(tmp_path / "same", RunSpec("before", **spec), RunSpec("after", acceptance_seed=1, **spec),
                    metrics=("acceptance",))
    assert {r.verdict for r in _rows(same, "acceptance_length")} == {Verdict.WITHIN_NOISE}


def test_repeats_widen_the_interval(tmp_path):
    """Whole-repeat pace noise is invisible to a request bootstrap of one repeat; resampling repeats sees it."""
    base = dict(noise=0.01, num_steps=(0,))
    repeated = _compare(tmp_path / "r", RunSpec("before", repeats=3, repeat_noise=0.15, **base),
                        RunSpec("after", repeats=3, repeat_noise=0.15, speed=1.05, timing_seed=1, **base),
                        metrics=("output_throughput",))
    single = _compare(tmp_path / "s", RunSpec("before", **base), RunSpec("after", speed=1.05, timing_seed=1, **base),
                      metrics=("output_throughput",))
    for wide, narrow in zip(_rows(repeated, "output_throughput"), _rows(single, "output_throughput")):
        assert wide.num_before == 3 * 40
        assert wide.interval.high - wide.interval.low > 4 * (narrow.interval.high - narrow.interval.low)
        assert wide.verdict is Verdict.WITHIN_NOISE and narrow.verdict is Verdict.IMPROVED


def test_min_change_and_fixed_seed(tmp_path):
    before, after = RunSpec("before", num_steps=(0,)), RunSpec("after", speed=1.2, timing_seed=1, num_steps=(0,))
    metrics = ("throughput", "ttft_p99")
    first = _compare(tmp_path / "a", before, after, metrics=metrics)
    again = _compare(tmp_path / "b", before, after, metrics=metrics)
    assert [(r.delta, r.interval) for r in first.rows] == [(r.delta, r.interval) for r in again.rows]
    other_seed = _compare(tmp_path / "c", before, after, seed=1, metrics=metrics)
    assert [r.interval for r in first.rows] != [r.interval for r in other_seed.rows]
    lenient = _compare(tmp_path / "d", before, after, min_change=25.0, metrics=metrics)
    assert {r.verdict for r in _rows(lenient, "output_throughput")} == {Verdict.WITHIN_NOISE}


def test_too_few_requests_give_no_verdict(tmp_path):
    comparison = _compare(tmp_path, RunSpec("before", num_requests=3), RunSpec("after", num_requests=3, speed=2),
                          metrics=("output_throughput",))
    row = _rows(comparison, "output_throughput")[0]
    assert row.delta == pytest.approx(1.0, abs=0.1) and row.interval is None and row.verdict is Verdict.NOT_AVAILABLE
