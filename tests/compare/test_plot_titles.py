"""No figure cuts its titles (single-temperature runs give one narrow panel per figure), and a speed-only
workload gets no accuracy figure."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tests.support.compare_fixtures import RunSpec, write_run
from specbench.compare.loading import load_run
from specbench.compare.plots import plot_runs, write_plots


def _texts_inside(figure) -> list[str]:
    """Every title that reaches past the figure's edges."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    titles = [figure._suptitle] + [ax.title for ax in figure.axes]
    cut = []
    for text in titles:
        if text is None or not text.get_text():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < 0 or box.x1 > figure.bbox.width or box.y1 > figure.bbox.height:
            cut.append(text.get_text())
    return cut


@pytest.mark.slow  # renders every figure twice: ~10 s
@pytest.mark.parametrize("workload", ["gsm8k", "mt_bench"])
def test_titles_fit_their_figures(workload, tmp_path):
    runs = [load_run(write_run(tmp_path, f"run-{label}", RunSpec(label, workload=workload, temperatures=(0.0,),
                                                                    concurrencies=(1, 4), num_steps=(0, 3),
                                                                    num_requests=8)))
            for label in ("before", "after-with-a-long-label")]
    figures = plot_runs(runs)
    names = [f.name for f in figures]
    assert {"acceptance_length_vs_num_steps", "speedup_heatmap", "accuracy_agreement"} <= set(names)
    for named in figures:
        assert _texts_inside(named.figure) == [], named.name
    assert all(path.stat().st_size > 0 for path in write_plots(runs, tmp_path / "plots"))


def test_speed_only_workload_has_no_accuracy_figure(tmp_path):
    run = load_run(write_run(tmp_path, "rnd", RunSpec("rnd", workload="random", temperatures=(0.0,), num_requests=8,
                                                     is_correct=lambda i: False)))
    names = [f.name for f in plot_runs([run])]
    assert "accuracy_agreement" not in names and "throughput_tpot_vs_concurrency" in names
