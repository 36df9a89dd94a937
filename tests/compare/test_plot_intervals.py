"""Figures carry 95% intervals where a run has them (repeat spread, accuracy stderr), mark mutant runs in legends
and titles, and notebooks find results/ from the repo root or from notebooks/."""

from __future__ import annotations

import numpy as np

from specbench.compare.loading import load_run
from specbench.compare.plot_data import run_series
from specbench.compare.plots import mark_engine_notes
from specbench.compare.plots_latency import throughput_tpot_figure
from specbench.compare.results_dir import find_results_dir
from tests.support.compare_fixtures import RunSpec, write_run


def test_repeat_spread_gives_a_ratio_interval_and_too_few_repeats_none(tmp_path):
    noisy = load_run(write_run(tmp_path, "noisy", RunSpec("noisy", repeats=3, repeat_noise=0.2, num_requests=8)))
    pair = load_run(write_run(tmp_path, "pair", RunSpec("pair", repeats=2, repeat_noise=0.2, num_requests=8)))
    noisy_cells, pair_cells = (s.cells for s in run_series([noisy, pair]))
    low, high, mean = (noisy_cells[f"output_throughput{s}"] for s in ("_low", "_high", ""))
    assert (low > 0).all() and (low < mean).all() and (mean < high).all()
    # the interval is the mean times exp(-/+ the t-interval half-width of the three repeats' mean log value)
    first = noisy.cells[(noisy.cells["concurrency"] == 1) & (noisy.cells["num_steps"] == 0)]["output_throughput"]
    half = 4.302653 * np.log(first).std(ddof=1) / np.sqrt(3)
    row = noisy_cells[(noisy_cells["concurrency"] == 1) & (noisy_cells["num_steps"] == 0)]
    assert np.isclose(row["output_throughput_low"].iloc[0], first.mean() * np.exp(-half), rtol=1e-5)
    assert np.isclose(row["output_throughput_high"].iloc[0], first.mean() * np.exp(half), rtol=1e-5)
    assert pair_cells["output_throughput_low"].isna().all()  # 2 repeats: t = 12.7 would swamp the data


def test_latency_points_have_error_bars_and_mutants_are_marked(tmp_path):
    clean = load_run(write_run(tmp_path, "clean", RunSpec("clean", repeats=3, repeat_noise=0.2, num_requests=8,
                                                          concurrencies=(1,), num_steps=(0,))))
    mutant = load_run(write_run(tmp_path, "mut", RunSpec("mut", num_requests=8, concurrencies=(1,), num_steps=(0,),
                                                         manifest={"fault_injected": "draft-kv-slice"})))
    named = throughput_tpot_figure(run_series([clean, mutant]))
    mark_engine_notes([named], [clean, mutant])
    figure = named.figure
    assert "MUTANT[draft-kv-slice]" in figure.get_suptitle()
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert any("mut MUTANT[draft-kv-slice]" in label for label in labels)
    assert not any("clean MUTANT" in label for label in labels)
    containers = figure.axes[0].containers  # error bars for clean's repeats; none for the single repeat
    assert len(containers) == 1 and containers[0].has_yerr
    segments = containers[0].lines[2][0].get_segments()  # one vertical bar per concurrency: low to high
    series = run_series([clean, mutant])[0].cells
    assert np.isclose(segments[0][0][1], series["output_throughput_low"].iloc[0])
    assert np.isclose(segments[0][1][1], series["output_throughput_high"].iloc[0])


def test_results_dir_is_found_from_the_repo_root_and_from_notebooks(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "notebooks").mkdir()
    assert find_results_dir(tmp_path) == tmp_path / "results"
    assert find_results_dir(tmp_path / "notebooks") == tmp_path / "results"
    assert find_results_dir(tmp_path / "results" / "..") == tmp_path / "results"
    lone = tmp_path / "notebooks" / "x"
    lone.mkdir()
    (tmp_path / "results").rmdir()
    assert find_results_dir(lone) == lone / "results"  # none anywhere: where a new one would go


def test_acceptance_points_and_bars_carry_intervals_over_the_pooled_cells(tmp_path):
    from specbench.compare.plots_acceptance import acceptance_length_figure, per_position_figure

    noisy = load_run(write_run(tmp_path, "noisy", RunSpec("noisy", repeats=3, repeat_noise=0.2, num_requests=8)))
    acceptance = run_series([noisy])[0].acceptance
    # by hand: the rounds-weighted mean of the (temperature, k) cells and its t-interval over those cells
    cells = noisy.cells[noisy.cells["num_steps"] == acceptance["num_steps"].iloc[0]]
    w, x = cells["num_draft_rounds"].to_numpy(float), cells["acceptance_length"].to_numpy(float)
    mean = (w * x).sum() / w.sum()
    n = len(x)
    half = np.sqrt((w**2 * (x - mean) ** 2).sum() / w.sum() ** 2 * n / (n - 1)) * __import__("scipy").stats.t.ppf(
        0.975, n - 1)
    assert np.isclose(acceptance["acceptance_length"].iloc[0], mean)
    assert np.isclose(acceptance["acceptance_length_ci"].iloc[0], half)
    assert (acceptance["accept_rate_pos_1_ci"] >= 0).all()
    figure = acceptance_length_figure(run_series([noisy])).figure
    assert any(c.has_yerr for c in figure.axes[0].containers)
    bars = per_position_figure(run_series([noisy])).figure.axes[0].containers
    assert any(getattr(c, "errorbar", None) is not None for c in bars)
