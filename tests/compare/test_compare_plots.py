"""Figures: the expected panels, lines and bars (from the Figure objects), plotted values, and valid PNG files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.container import BarContainer

from tests.support.compare_fixtures import RunSpec, write_run
from specbench.compare.loading import load_run
from specbench.compare.plots import plot_runs

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GRID = dict(temperatures=(0.0, 1.0), concurrencies=(1, 4), num_steps=(0, 2), num_requests=12)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    before = write_run(root, "base", RunSpec("before", **GRID))
    after = write_run(root, "new", RunSpec("after", speed=1.3, accept_prob=0.7, timing_seed=1, **GRID))
    return root, [load_run(before), load_run(after)]


def _by_name(figures):
    return {f.name: f.figure for f in figures}


def _panels(figure):
    return [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]


def test_every_figure_has_its_panels_and_series(runs):
    _, loaded = runs
    figures = _by_name(plot_runs(loaded))
    assert list(figures) == ["throughput_tpot_vs_concurrency", "ttft_vs_concurrency",
                             "acceptance_length_vs_num_steps", "acceptance_per_position", "speedup_heatmap",
                             "pareto_throughput_per_user", "speedup_vs_concurrency", "accuracy_agreement"]
    for name in ("throughput_tpot_vs_concurrency", "ttft_vs_concurrency"):
        axes = _panels(figures[name])
        assert len(axes) == 4  # 2 temperatures x 2 metrics
        assert all(len(ax.get_lines()) == 4 for ax in axes)  # 2 runs x 2 num-steps
        assert all("(ms)" in ax.get_ylabel() or "(tok/s)" in ax.get_ylabel() for ax in axes)
        assert all("concurrency" in ax.get_xlabel() for ax in axes)
    acceptance = _panels(figures["acceptance_length_vs_num_steps"])
    # 2 runs + ceiling (error-bar caps are unlabelled lines)
    assert len(acceptance) == 2 and all(len([x for x in ax.get_lines() if not x.get_label().startswith("_")]) == 3
                                        for ax in acceptance)
    positions = _panels(figures["acceptance_per_position"])
    assert all(len([c for c in ax.containers if isinstance(c, BarContainer)]) == 2 for ax in positions)
    assert all(len(c) == 2 for ax in positions for c in ax.containers if isinstance(c, BarContainer))
    heatmaps = _panels(figures["speedup_heatmap"])
    assert len(heatmaps) == 4 and len(figures["speedup_heatmap"].axes) == 5  # + colour bar
    assert all(ax.images[0].get_array().shape == (2, 1) for ax in heatmaps)  # concurrency x (k > 0)
    accuracy = _panels(figures["accuracy_agreement"])
    assert len(accuracy) == 6  # 2 temperatures x (strict, flexible, agreement)
    for figure in figures.values():
        assert figure.get_suptitle()
        assert all(ax.get_title() for ax in _panels(figure))


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_plotted_values_are_the_runs_numbers(runs):
    _, loaded = runs
    figures = _by_name(plot_runs(loaded))
    ax = _panels(figures["throughput_tpot_vs_concurrency"])[0]  # output throughput, temperature 0
    line = next(line for line in ax.get_lines() if line.get_label() == "after · k=2")
    cells = loaded[1].cells
    expected = cells[(cells["temperature"] == 0) & (cells["num_steps"] == 2)].sort_values("concurrency")
    assert np.allclose(line.get_ydata(), expected["output_throughput"])
    heatmap = _panels(figures["speedup_heatmap"])[2]  # after, temperature 0
    assert np.allclose(heatmap.images[0].get_array().ravel(), expected["speedup"])


def test_runs_without_baselines_or_answers(tmp_path):
    spec = dict(num_steps=(2,), workload="random", concurrencies=(1, 2, 8, 16), num_requests=6)
    run = load_run(write_run(tmp_path, "r", RunSpec("speed-only", **spec)))
    figures = _by_name(plot_runs([run]))
    assert "speedup_heatmap" not in figures  # no num-steps 0 cells
    assert "accuracy_agreement" not in figures  # a speed-only workload: accuracy and agreement mean nothing
    throughput = _panels(figures["throughput_tpot_vs_concurrency"])[0]
    assert throughput.get_xscale() == "log"  # 1..16 spans more than 8x


@pytest.mark.slow
def test_cli_writes_valid_pngs(runs, tmp_path, monkeypatch, capsys):
    import matplotlib.image

    from specbench.cli.app import main

    root, _ = runs
    monkeypatch.setattr(sys, "argv", ["specbench", "plot", "before", "after", "--results-dir", str(root),
                                      "--out-dir", str(tmp_path)])
    try:
        main()
    except SystemExit as exc:
        assert not exc.code
    written = [Path(line.removeprefix("wrote ")) for line in capsys.readouterr().out.splitlines()]
    assert sorted(written) == sorted(tmp_path.glob("*.png")) and len(written) == 8
    for path in written:
        assert path.read_bytes()[:8] == PNG_SIGNATURE
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 300 and image.shape[1] > 500 and image.std() > 0.05  # not blank
