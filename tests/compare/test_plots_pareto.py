"""The Pareto and speedup-vs-concurrency figures (compare/plots_pareto.py): the data behind them and the files."""

from __future__ import annotations

import numpy as np
import pytest

from specbench.compare.crossover import crossovers
from specbench.compare.loading import load_run
from specbench.compare.plot_data import run_series
from specbench.compare.plots import write_plots
from specbench.compare.plots_pareto import pareto_figure, pareto_points, speedup_concurrency_figure
from tests.support.compare_fixtures import RunSpec, write_run

GRID = dict(temperatures=(0.0,), concurrencies=(1, 2, 4), num_steps=(0, 2), num_requests=8, repeats=2)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return load_run(write_run(tmp_path_factory.mktemp("results"), "r", RunSpec("r", **GRID)))


def test_pareto_points_are_one_over_tpot_and_throughput(run):
    (series,) = run_series([run])
    points = pareto_points(series)
    assert len(points) == 6  # 3 concurrencies x 2 k
    cells = run.cells[(run.cells["num_steps"] == 2) & (run.cells["concurrency"] == 4)]
    row = points[(points["num_steps"] == 2) & (points["concurrency"] == 4)].iloc[0]
    assert row["tokens_per_s_per_user"] == pytest.approx(1 / cells["tpot_s_mean"].mean())
    assert row["output_throughput"] == pytest.approx(cells["output_throughput"].mean())
    ax = pareto_figure([series]).figure.axes[0]
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert sorted(line.get_label() for line in lines) == ["r · k=0", "r · k=2"]
    k2 = next(line for line in lines if line.get_label().endswith("k=2"))
    assert np.allclose(k2.get_ydata(), points[points["num_steps"] == 2]["output_throughput"])
    assert {t.get_text() for t in ax.texts} == {"c=1", "c=2", "c=4"}


def test_speedup_figure_plots_the_crossover_points(run):
    (crossover,) = crossovers(run.cells.to_dict("records"))
    named = speedup_concurrency_figure([run], ["r"])
    ax = named.figure.axes[0]
    (line,) = [line for line in ax.get_lines() if line.get_label() == "r · k=2"]
    assert list(line.get_xdata()) == [1, 2, 4]
    assert np.allclose(line.get_ydata(), [p.speedup for p in crossover.points])
    per_repeat = run.cells[(run.cells["num_steps"] == 2) & (run.cells["concurrency"] == 1)]["speedup"]
    assert crossover.points[0].speedup == pytest.approx(float(np.exp(np.log(per_repeat).mean())))


def test_plot_writes_the_new_files(run, tmp_path):
    paths = {p.name for p in write_plots([run], tmp_path)}
    assert {"pareto_throughput_per_user.png", "speedup_vs_concurrency.png"} <= paths
    assert (tmp_path / "pareto_throughput_per_user.png").read_bytes()[:4] == b"\x89PNG"
