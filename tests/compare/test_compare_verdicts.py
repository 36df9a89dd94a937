"""Verdicts on synthetic runs with known differences: real changes are called, noise is not, and speed metrics
are judged on run-to-run noise only."""

from __future__ import annotations

import math

import pytest

from tests.support.compare_fixtures import RunSpec, write_run
from specbench.compare.comparison import CompareOptions, compare_runs
from specbench.compare.loading import load_run
from specbench.compare.formatting import verdict_text
from specbench.compare.noise import NoiseBasis
from specbench.compare.verdict import Verdict


def _runs(tmp_path, before: RunSpec, after: RunSpec):
    return load_run(write_run(tmp_path, "before", before)), load_run(write_run(tmp_path, "after", after))


def _compare(tmp_path, before: RunSpec, after: RunSpec, **options):
    return _options(_runs(tmp_path, before, after), **options)


def _options(runs, **options):
    return compare_runs(*runs, CompareOptions(**{"num_resamples": 500, **options}))


def _rows(comparison, metric: str):
    rows = [r for r in comparison.rows if r.metric.name == metric]
    assert rows, metric
    return rows


REPEATED = dict(repeats=3, repeat_noise=0.01)  # speed verdicts need a run-to-run estimate


def test_twenty_percent_faster_with_low_noise_is_improved(tmp_path):
    """A change to speculation: its cells 20% faster, the k = 0 control cells untouched."""
    fewer = dict(num_requests=20, **REPEATED)
    comparison = _compare(tmp_path, RunSpec("before", **fewer),
                          RunSpec("after", speed=1.2, baseline_speed=1.0, timing_seed=1, **fewer), num_resamples=200)
    for row in _rows(comparison, "output_throughput"):
        assert row.basis is NoiseBasis.RUNS and (row.num_runs_before, row.num_runs_after) == (3, 3)
        assert row.run_spread is not None and row.bootstrap_interval is not None
        assert row.interval.low <= row.delta <= row.interval.high
        if row.key.num_steps == 0:
            assert row.verdict is Verdict.WITHIN_NOISE and abs(row.control_delta) < 0.05
            continue
        assert row.delta == pytest.approx(0.2, abs=0.03) and 0 < row.interval.low and 0 < row.mde < row.delta
        assert row.verdict is Verdict.IMPROVED
    for name in ("tpot_mean", "ttft_p99", "e2e_median", "speedup"):  # lower latency is better: a drop is improved
        assert {r.verdict for r in _rows(comparison, name) if r.key.num_steps} == {Verdict.IMPROVED}, name
    # Nothing about acceptance or answers changed: those stay within noise.
    for name in ("acceptance_length", "accuracy_flexible", "agreement_flexible"):
        assert {r.verdict for r in _rows(comparison, name)} == {Verdict.WITHIN_NOISE}, name


def test_a_change_the_control_cells_made_too_is_within_drift(tmp_path):
    """Every cell 20% faster, k = 0 included: across two runs that is what a lighter load does, so no speed row
    is called (the within-run ratio, speedup, is unchanged); each row says how far the control moved."""
    fewer = dict(num_requests=20, **REPEATED)
    comparison = _compare(tmp_path, RunSpec("before", **fewer), RunSpec("after", speed=1.2, timing_seed=1, **fewer),
                          num_resamples=200, metrics=("throughput", "latency", "speedup"))
    for row in comparison.rows:
        expected = Verdict.WITHIN_NOISE if row.metric.name == "speedup" else Verdict.WITHIN_DRIFT
        assert row.verdict is expected, row.metric.name
        if row.metric.name != "speedup":
            assert row.interval.low > 0 or row.interval.high < 0  # beyond the repeats' noise, but the load's
            assert row.control_delta is not None and abs(row.control_delta) > 0.1


def test_twenty_percent_slower_is_regressed(tmp_path):
    comparison = _compare(tmp_path, RunSpec("before", **REPEATED),
                          RunSpec("after", speed=1 / 1.2, baseline_speed=1.0, timing_seed=1, **REPEATED),
                          metrics=("output_throughput", "tpot_mean"))
    assert {r.verdict for r in _rows(comparison, "output_throughput") if r.key.num_steps} == {Verdict.REGRESSED}
    assert {r.verdict for r in _rows(comparison, "tpot_mean") if r.key.num_steps} == {Verdict.REGRESSED}


def test_speed_intervals_are_log_ratios_symmetric_under_swapping(tmp_path):
    """Never past -100%, and the verdict the same whichever run comes first (the reported TPOT -77.1%
    [-137.1%, -17.2%] and the TTFT called one way only)."""
    noisy = dict(repeats=2, repeat_noise=0.4, num_steps=(0,), num_requests=10)
    runs = _runs(tmp_path, RunSpec("before", **noisy), RunSpec("after", speed=3.0, timing_seed=1, **noisy))
    forward = _options(runs, metrics=("throughput", "latency"))
    backward = _options(runs[::-1], metrics=("throughput", "latency"))
    for one, other in zip(forward.rows, backward.rows):
        assert one.metric == other.metric and one.interval is not None
        assert one.interval.low > -1 and other.interval.low > -1
        assert (1 + one.delta) * (1 + other.delta) == pytest.approx(1)
        assert (1 + one.interval.low) * (1 + other.interval.high) == pytest.approx(1)
        assert (one.verdict is Verdict.WITHIN_NOISE) == (other.verdict is Verdict.WITHIN_NOISE)


def test_drift_probes_widen_the_speed_interval(tmp_path):
    base = dict(num_requests=20, **REPEATED)
    quiet = _compare(tmp_path / "q", RunSpec("before", drift=0.0, **base),
                     RunSpec("after", drift=0.0, speed=1.2, baseline_speed=1.0, timing_seed=1, **base),
                     metrics=("output_throughput",))
    loud = _compare(tmp_path / "l", RunSpec("before", drift=0.5, **base),
                    RunSpec("after", drift=-0.4, speed=1.2, baseline_speed=1.0, timing_seed=1, **base),
                    metrics=("output_throughput",))
    for calm, drifting in zip(_rows(quiet, "output_throughput"), _rows(loud, "output_throughput")):
        assert drifting.interval.high - drifting.interval.low > 3 * (calm.interval.high - calm.interval.low)
        assert drifting.probe_sd == pytest.approx(((math.log(1.5) ** 2 + math.log(0.6) ** 2) / 2) ** 0.5)
    assert {r.verdict for r in _rows(quiet, "output_throughput") if r.key.num_steps} == {Verdict.IMPROVED}
    assert {r.verdict for r in _rows(loud, "output_throughput")} == {Verdict.WITHIN_NOISE}
    assert loud.drift.worst_before == 0.5 and loud.drift.worst_after == -0.4


def test_change_inside_the_run_to_run_noise_is_within_noise(tmp_path):
    noisy = dict(repeats=3, repeat_noise=0.15, num_steps=(0,))
    comparison = _compare(tmp_path, RunSpec("before", **noisy), RunSpec("after", speed=1.03, timing_seed=1, **noisy),
                          metrics=("throughput",))
    for row in _rows(comparison, "output_throughput"):
        assert row.delta != 0 and row.interval.low < 0 < row.interval.high and row.mde > abs(row.delta)
        assert row.verdict is Verdict.WITHIN_NOISE
    # The same shift with little run-to-run noise is beyond it.
    quiet = dict(repeats=3, repeat_noise=0.005, noise=0.005, num_steps=(0,))
    quiet = _compare(tmp_path / "quiet", RunSpec("before", **quiet),
                     RunSpec("after", speed=1.03, timing_seed=1, **quiet), metrics=("throughput",))
    # ... of the repeats, but the k = 0 cells are the load's control: across runs their own move is the load's.
    assert {r.verdict for r in _rows(quiet, "output_throughput")} == {Verdict.WITHIN_DRIFT}


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


def test_one_run_gives_no_speed_verdict_and_repeats_give_one_from_their_spread(tmp_path):
    """Whole-repeat pace noise is invisible to a request bootstrap of one run: one run per side gets no speed
    verdict at all, however narrow its within-run interval; repeats give an interval from their spread."""
    base = dict(noise=0.01, num_steps=(0,))
    repeated = _compare(tmp_path / "r", RunSpec("before", repeats=3, repeat_noise=0.15, **base),
                        RunSpec("after", repeats=3, repeat_noise=0.15, speed=1.05, timing_seed=1, **base),
                        metrics=("output_throughput",))
    single = _compare(tmp_path / "s", RunSpec("before", **base), RunSpec("after", speed=1.05, timing_seed=1, **base),
                      metrics=("output_throughput",))
    for wide, narrow in zip(_rows(repeated, "output_throughput"), _rows(single, "output_throughput")):
        assert wide.num_before == 3 * 40 and (wide.num_runs_before, wide.num_runs_after) == (3, 3)
        low, high = narrow.bootstrap_interval.low, narrow.bootstrap_interval.high
        assert wide.interval.high - wide.interval.low > 4 * (high - low)
        assert wide.verdict is Verdict.WITHIN_NOISE and wide.run_spread > 0.05
        assert low > 0  # the within-run interval alone would have called it
        assert narrow.interval is None and narrow.mde is None and narrow.verdict is Verdict.NO_RUN_ESTIMATE


def test_one_prefill_batch_untouched_cell_is_not_a_regression(tmp_path):
    """The reported case: 8 prompts at concurrency 8, one run: every TTFT of a cell is the same, the within-run
    interval has zero width, and the k=0 cell (untouched) moved by a few %. No speed verdict; the answer
    agreement drop on 8 questions is still REGRESSED, its interval excluding 0."""
    spec = dict(num_requests=8, concurrencies=(8,), num_steps=(0, 3), noise=0.0)
    comparison = _compare(tmp_path, RunSpec("before", **spec),
                          RunSpec("after", speed=1 / 1.055, is_correct=lambda i: i < 3, answer_seed=1,
                                  is_lossless=False, **spec),
                          metrics=("ttft_mean", "output_throughput", "speedup", "agreement_strict"))
    ttft = [r for r in _rows(comparison, "ttft_mean") if r.key.num_steps == 0]
    for row in ttft:
        assert row.delta == pytest.approx(0.055, abs=1e-6)
        assert row.bootstrap_interval.low == pytest.approx(row.bootstrap_interval.high)  # zero width
    speed = [r for r in comparison.rows if r.metric.group in ("latency", "throughput", "speedup")]
    assert speed and {r.verdict for r in speed if r.key.num_steps == 0} == {Verdict.NO_RUN_ESTIMATE}
    # The after run's k = 3 outputs differ from its k = 0 (a correctness regression): no speed comparison there.
    assert {r.verdict for r in speed if r.key.num_steps} == {Verdict.NOT_COMPARABLE}
    (agreement,) = _rows(comparison, "agreement_strict")
    assert agreement.before == 1.0 and agreement.after == pytest.approx(0.375)
    assert agreement.interval.high < 0 and agreement.verdict is Verdict.REGRESSED
    assert agreement.mde == pytest.approx(3 / 8)  # (1 - 3/8)^8 < 2.5%: three one-way changes are detectable
    # With repeats: throughput (paced per repeat) is judged on its spread between runs; the fixture's TTFT does
    # not vary between repeats at all, a zero-width interval, so it still gets no verdict.
    with_repeats = _compare(tmp_path / "r", RunSpec("before", repeats=3, repeat_noise=0.01, **spec),
                            RunSpec("after", speed=1 / 1.055, repeats=3, repeat_noise=0.01, **spec),
                            metrics=("ttft_mean", "output_throughput"))
    throughput = _rows(with_repeats, "output_throughput")
    assert all(r.interval is not None and r.run_spread > 0 and r.basis is NoiseBasis.RUNS for r in throughput)
    assert {r.verdict for r in throughput if r.key.num_steps == 0} == {Verdict.WITHIN_DRIFT}  # the control moved
    for row in _rows(with_repeats, "ttft_mean"):
        assert row.num_runs_before == 3 and row.run_spread == 0 and row.verdict is Verdict.NO_RUN_ESTIMATE
        assert verdict_text(row) == "n/a (no run spread)"
    assert verdict_text(ttft[0]) == "n/a (1 run)"


def test_min_change_and_fixed_seed(tmp_path):
    before = RunSpec("before", num_steps=(0,), num_requests=20, **REPEATED)
    after = RunSpec("after", speed=1.2, timing_seed=1, num_steps=(0,), num_requests=20, **REPEATED)
    metrics = ("throughput", "ttft_p99")
    runs = _runs(tmp_path, before, after)
    first = _options(runs, metrics=metrics)
    again = _compare(tmp_path / "b", before, after, metrics=metrics)
    assert [(r.delta, r.interval, r.bootstrap_interval) for r in first.rows] == [
        (r.delta, r.interval, r.bootstrap_interval) for r in again.rows]
    other_seed = _options(runs, seed=1, metrics=metrics)
    assert [r.bootstrap_interval for r in first.rows] != [r.bootstrap_interval for r in other_seed.rows]
    assert [r.interval for r in first.rows] == [r.interval for r in other_seed.rows]  # t: no resampling
    assert {r.verdict for r in _rows(first, "output_throughput")} == {Verdict.WITHIN_DRIFT}  # k = 0: the control
    lenient = _options(runs, min_change=25.0, metrics=metrics)
    assert {r.verdict for r in _rows(lenient, "output_throughput")} == {Verdict.WITHIN_NOISE}
    assert all(r.mde >= 0.25 for r in lenient.rows)


def test_too_few_requests_give_no_verdict(tmp_path):
    few = dict(num_requests=3, num_steps=(0, 2))
    comparison = _compare(tmp_path, RunSpec("before", **few), RunSpec("after", speed=2, **few),
                          metrics=("output_throughput", "acceptance_length"))
    throughput = _rows(comparison, "output_throughput")[0]
    assert throughput.delta == pytest.approx(1.0, abs=0.1) and throughput.interval is None
    assert throughput.verdict is Verdict.NO_RUN_ESTIMATE  # one run a side: no speed verdict either way
    acceptance = _rows(comparison, "acceptance_length")[0]  # 3 requests are enough to resample
    assert acceptance.interval is not None and acceptance.verdict is Verdict.WITHIN_NOISE


def test_acceptance_collapse_with_few_requests_per_repeat_is_regressed(tmp_path):
    """The reported case: 4 requests a repeat, 2 repeats (under the old 5-per-repeat / 3-repeat minimum), the
    acceptance gone to 0: requests pooled over the repeats, the collapse is REGRESSED, and the reverse (from 0)
    is IMPROVED, never n/a."""
    few = dict(num_requests=4, repeats=2, num_steps=(0, 3), concurrencies=(1,))
    runs = _runs(tmp_path, RunSpec("before", **few), RunSpec("after", accept_prob=0.0, **few))
    metrics = ("acceptance_length", "acceptance_rate")
    for name in metrics:
        (row,) = _rows(_options(runs, metrics=metrics), name)
        assert row.after == (1.0 if name == "acceptance_length" else 0.0) and row.num_before == 8
        assert row.verdict is Verdict.REGRESSED, name
        (back,) = _rows(_options(runs[::-1], metrics=metrics), name)
        assert back.verdict is Verdict.IMPROVED, name
