"""Properties of every verdict, over random inputs: the printed interval and the verdict never disagree, and a
speed metric never gets improved / regressed without a run-to-run estimate (one run a side, or no spread)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.compare.bootstrap import Estimate
from specbench.compare.comparison import CompareOptions, MetricDelta, judge_estimates, judge_paired
from specbench.compare.formatting import verdict_text
from specbench.compare.matching import MatchKey
from specbench.compare.metrics_catalog import Resampling, catalog
from specbench.compare.noise import MIN_RUNS, NoiseBasis, smallest_discordance
from specbench.compare.verdict import Verdict

KEY = MatchKey("gsm8k", "draft", 2, 0.0, 4)
METRICS = catalog(2)
ESTIMATED = [m for m in METRICS if m.resampling is not Resampling.PAIRED]
PAIRED = [m for m in METRICS if m.resampling is Resampling.PAIRED]
CALLED = (Verdict.IMPROVED, Verdict.REGRESSED)
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

options = st.builds(
    CompareOptions,
    num_resamples=st.just(100),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
    seed=st.integers(0, 3),
    min_change=st.sampled_from([0.0, 0.0, 2.0, 20.0]),
)


@st.composite
def estimates(draw) -> Estimate:
    """Per-repeat values (constant ones: a zero-width case) and request-bootstrap replicates (or none)."""
    num_repeats = draw(st.integers(1, 4))
    value = st.sampled_from([0.0, 0.5, 1.0, 2.0]) | st.floats(0.05, 50.0)
    if draw(st.booleans()):
        points = [draw(value)] * num_repeats  # no spread between repeats
    else:
        points = draw(st.lists(value, min_size=num_repeats, max_size=num_repeats))
    point = float(np.mean(points))
    spread = draw(st.sampled_from([None, 0.0, 0.01, 0.3]))  # 0.0: a zero-width within-run interval
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    replicates = None if spread is None else point * np.exp(rng.normal(0, spread, 60))  # [num_resamples]
    return Estimate(point, replicates, draw(st.integers(1, 40)) * num_repeats, num_repeats, tuple(points))


def _check_equivalence(row: MetricDelta, options: CompareOptions) -> None:
    """Beyond noise <=> the printed interval excludes 0 and |delta| >= min_change; its side gives the label."""
    interval = row.interval
    large = row.delta is not None and abs(row.delta) >= options.min_change / 100
    from_zero = row.delta is None and row.before == 0 and row.bootstrap_interval is not None
    if from_zero:
        # from 0 (a collapsed acceptance): no ratio; the difference's interval decides, any size of change counts
        interval, large = row.bootstrap_interval, True
    excludes = interval is not None and (interval.low > 0 or interval.high < 0)
    assert (row.verdict in CALLED) == (excludes and large), row
    if row.verdict in CALLED:
        assert (row.verdict is Verdict.IMPROVED) == ((interval.low > 0) == row.metric.higher_is_better)
    if row.verdict is Verdict.WITHIN_NOISE:
        assert interval is not None
    if from_zero:  # no MDE on a ratio that has no base
        return
    assert (row.mde is None) == (interval is None)
    if row.mde is not None:
        assert row.mde >= options.min_change / 100


@FAST
@given(metric=st.sampled_from(ESTIMATED), before=estimates(), after=estimates(), options=options)
def test_estimated_metrics_verdict_matches_interval(metric, before, after, options):
    row = judge_estimates(metric, KEY, before, after, options)
    _check_equivalence(row, options)
    assert (row.num_runs_before, row.num_runs_after) == (before.num_repeats, after.num_repeats)
    if row.basis is NoiseBasis.RUNS:
        assert metric.group in ("throughput", "latency", "goodput", "speedup")
        no_spread = len(set(before.repeat_points)) == 1 and len(set(after.repeat_points)) == 1
        if min(before.num_repeats, after.num_repeats) < MIN_RUNS or no_spread:
            assert row.verdict not in CALLED and row.interval is None
            if row.delta is not None:
                assert row.verdict is Verdict.NO_RUN_ESTIMATE
                single = min(before.num_repeats, after.num_repeats) < MIN_RUNS
                assert verdict_text(row) == ("n/a (1 run)" if single else "n/a (no run spread)")
        if row.interval is not None:
            assert row.interval.low < row.delta < row.interval.high  # never a zero-width speed interval
            assert row.run_spread > 0
    else:
        assert metric.group in ("acceptance", "tree")  # round-resampled counts
        assert row.bootstrap_interval is None or (row.before == 0 and row.delta is None)  # from 0: the difference's


@st.composite
def paired_outcomes(draw) -> tuple[pd.Series, pd.Series, int, int]:
    """Per-question mean outcomes of both runs (1-2 repeats: 0, 0.5 or 1), some changed, maybe none."""
    num_questions = draw(st.integers(1, 24))
    runs_before, runs_after = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    levels = lambda runs: st.sampled_from([i / runs for i in range(runs + 1)])  # noqa: E731
    before = draw(st.lists(levels(runs_before), min_size=num_questions, max_size=num_questions))
    if draw(st.booleans()):
        after = list(before) if runs_after == runs_before else [round(v) for v in before]  # unchanged
    else:
        after = draw(st.lists(levels(runs_after), min_size=num_questions, max_size=num_questions))
    index = pd.MultiIndex.from_tuples([(str(i), 0) for i in range(num_questions)], names=["sample_id", "turn"])
    return pd.Series(before, index=index), pd.Series(after, index=index), runs_before, runs_after


@FAST
@given(metric=st.sampled_from(PAIRED), outcomes=paired_outcomes(), options=options)
def test_paired_metrics_verdict_matches_interval(metric, outcomes, options):
    before, after, runs_before, runs_after = outcomes
    row = judge_paired(metric, KEY, (before.mean(), before), (after.mean(), after), (runs_before, runs_after),
                       options)
    _check_equivalence(row, options)
    assert row.basis is NoiseBasis.QUESTIONS and row.num_before == len(before)
    assert row.mde >= smallest_discordance(len(before), options.confidence) / len(before) - 1e-12
    if (before == after).all():
        assert row.verdict is Verdict.WITHIN_NOISE  # [0, 0]: nothing changed
    # The sign test is reported, but it decides nothing: a called verdict needs only the interval.
    assert row.p_value is not None


def test_equal_repeats_have_no_spread_even_where_their_logs_round():
    """Hypothesis found it: three equal repeats whose log values' mean rounds off by an ulp gave a run spread of
    4e-16, a zero-width interval and a speed verdict on no evidence. Equal repeats are no spread: no interval."""
    from specbench.compare.metrics_catalog import Delta
    from specbench.compare.noise import run_evidence

    value = 0.15989197839567915  # log(value) * 3 / 3 != log(value) in floating point
    logs = np.log(np.array([value] * 3))
    assert ((logs - logs.mean()) ** 2).sum() > 0  # the rounding this guards against is there
    evidence = run_evidence([value] * 3, [value * 1.5] * 3, Delta.RELATIVE, 0.95)
    assert evidence.interval is None and evidence.spread == 0.0
