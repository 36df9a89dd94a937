"""Every plot kind, rendered from small fixture runs, is one a reader could put in a PR description: nothing drawn
outside the canvas, no interval below 0 (or past what the quantity can be), no interval from too few repeats (the
title says so instead), one colour per run and one marker per k, the sweep's speedup flags on the heatmap, and an
interval drawn wherever a title promises one."""

from __future__ import annotations

import pytest

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection

from specbench.compare.plots import plot_runs
from tests.support.compare_fixtures import plot_fixture_runs

KINDS = {"throughput_tpot_vs_concurrency", "ttft_vs_concurrency", "acceptance_length_vs_num_steps",
         "acceptance_per_position", "speedup_heatmap", "pareto_throughput_per_user", "speedup_vs_concurrency",
         "accuracy_agreement"}


def _outside(figure) -> list[str]:
    """What is drawn past the canvas: the figure's tight box (every drawn artist: titles, notes, tick labels,
    colorbars) and each legend, in pixels."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    boxes = [("figure", figure.get_tightbbox(renderer).transformed(figure.dpi_scale_trans))]
    boxes += [("legend", legend.get_window_extent(renderer)) for legend in figure.legends]
    boxes += [(t.get_text(), t.get_window_extent(renderer)) for t in figure.texts + [figure._suptitle] if t]
    return [name for name, box in boxes if box.x0 < -1 or box.y0 < -1 or box.x1 > width + 1 or box.y1 > height + 1]


def _error_bar_ys(ax) -> list[float]:
    return [y for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments() for y in seg[:, 1]]


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_every_plot_kind_fits_its_canvas_and_keeps_intervals_possible(tmp_path):
    figures = {f.name: f.figure for f in plot_runs(plot_fixture_runs(tmp_path, repeats=3))}
    assert KINDS <= set(figures)
    for name, figure in figures.items():
        assert _outside(figure) == [], name
        for ax in figure.axes:
            ys = _error_bar_ys(ax)
            assert all(y >= 0 for y in ys), name  # every plotted quantity is positive
            if name in ("acceptance_per_position", "accuracy_agreement"):
                assert all(y <= 100 + 1e-9 for y in ys), name
            if name == "acceptance_length_vs_num_steps":
                assert all(y >= 1 - 1e-9 for y in ys), name
    for name in ("throughput_tpot_vs_concurrency", "acceptance_length_vs_num_steps", "accuracy_agreement",
                 "speedup_vs_concurrency"):
        assert _error_bar_ys(figures[name].axes[0]), f"{name}: its title promises intervals"


def test_one_colour_per_run_and_one_marker_per_k(tmp_path):
    figures = {f.name: f.figure for f in plot_runs(plot_fixture_runs(tmp_path, repeats=1))}
    figure = figures["throughput_tpot_vs_concurrency"]
    lines = [line for line in figure.axes[0].get_lines() if "k=" in line.get_label()]
    by_run: dict[str, set] = {}
    by_k: dict[str, set] = {}
    for line in lines:
        run, k = line.get_label().split(" · ")
        by_run.setdefault(run, set()).add(line.get_color())
        by_k.setdefault(k, set()).add(line.get_marker())
    assert len(by_run) == 2 and all(len(colours) == 1 for colours in by_run.values())
    assert len({next(iter(c)) for c in by_run.values()}) == 2
    assert len(by_k) == 3 and all(len(markers) == 1 for markers in by_k.values())
    assert len({next(iter(m)) for m in by_k.values()}) == 3


def test_too_few_repeats_draw_no_interval_and_say_so(tmp_path):
    figures = {f.name: f.figure for f in plot_runs(plot_fixture_runs(tmp_path, repeats=2))}
    for name in ("throughput_tpot_vs_concurrency", "ttft_vs_concurrency", "speedup_vs_concurrency"):
        assert not any(_error_bar_ys(ax) for ax in figures[name].axes), name
        assert "no interval where fewer than 3 repeats" in " ".join(figures[name].get_suptitle().split()), name


def test_the_heatmap_shows_the_sweeps_flags(tmp_path):
    figure = {f.name: f.figure for f in plot_runs(plot_fixture_runs(tmp_path, repeats=1))}["speedup_heatmap"]
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert sum("(!)" in t for t in texts) == 1
    assert "(!) above what its acceptance allows" in " ".join(figure.get_suptitle().split())
