"""The figures people ask of a sweep: the Pareto front of per-user speed against total throughput, and the speedup
over k = 0 against concurrency with its crossover (compare/crossover.py). Panels per temperature; one curve per
(run, k)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from specbench.compare.crossover import Crossover, crossovers
from specbench.compare.loading import Run
from specbench.compare.plot_data import MIN_INTERVAL_SAMPLES, RunSeries, interval_note, temperatures
from specbench.compare.plot_style import (
    NamedFigure,
    add_note,
    axes_grid,
    concurrency_axis,
    line_style,
    new_figure,
    no_data,
    shared_legend,
    temperature_title,
)
from specbench.compare.matching import DEFAULT_TEMPERATURE


def pareto_points(series: RunSeries) -> pd.DataFrame:
    """One row per (temperature, num_steps, concurrency): tokens/s per user = 1 / mean TPOT (the streaming speed
    one request sees) and total output tokens/s, both means over repeats; rows without a TPOT dropped."""
    cells = series.cells.dropna(subset=["tpot_s_mean", "output_throughput"])
    cells = cells[cells["tpot_s_mean"] > 0]
    return pd.DataFrame({"temperature": cells["temperature"], "num_steps": cells["num_steps"].astype(int),
                         "concurrency": cells["concurrency"].astype(int),
                         "tokens_per_s_per_user": 1.0 / cells["tpot_s_mean"],
                         "output_throughput": cells["output_throughput"]}).sort_values(
        ["temperature", "num_steps", "concurrency"]).reset_index(drop=True)


def pareto_figure(series: Sequence[RunSeries]) -> NamedFigure:
    temps = temperatures(series)
    figure = new_figure(1, len(temps), "Pareto: total output tokens/s vs tokens/s per user (points: concurrency)",
                        panel_size=(5.4, 4.0))
    all_steps = sorted({int(k) for s in series for k in s.cells["num_steps"]})
    for ax, temperature in zip(axes_grid(figure, len(temps))[0], temps):
        drawn = False
        for index, run in enumerate(series):
            points = pareto_points(run)
            for num_steps, group in points[points["temperature"] == temperature].groupby("num_steps"):
                style = line_style(index, int(num_steps), all_steps)
                color = style["color"]
                ax.plot(group["tokens_per_s_per_user"], group["output_throughput"],
                        label=f"{run.label} · k={num_steps}", **style)
                for x, y, c in zip(group["tokens_per_s_per_user"], group["output_throughput"], group["concurrency"]):
                    ax.annotate(f"c={c}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
                drawn = True
        if not drawn:
            no_data(ax, "TPOT")
            continue
        ax.set(xlabel="tokens/s per user (1 / mean TPOT)", ylabel="output throughput (tok/s)",
               title=temperature_title(temperature))
        ax.grid(True, alpha=0.3)
    shared_legend(figure)
    return NamedFigure("pareto_throughput_per_user", figure)


def run_crossovers(run: Run) -> list[Crossover]:
    return crossovers(run.cells.to_dict("records"))


def speedup_concurrency_figure(runs: Sequence[Run], labels: Sequence[str]) -> NamedFigure | None:
    """Speedup vs concurrency per k: geometric mean over repeats, 95% t-interval bars (ratio intervals: never below
    0; drawn from MIN_INTERVAL_SAMPLES repeats, the title says when some have fewer), the crossover marked; None when
    no run has speedups at two concurrencies."""
    found = [(label, c) for run, label in zip(runs, labels) for c in run_crossovers(run)]
    if not found:
        return None
    temps = sorted({DEFAULT_TEMPERATURE if math.isnan(c.temperature) else c.temperature for _, c in found})
    figure = new_figure(1, len(temps), "Speedup vs k=0 by concurrency (95% interval over repeats; | crossover)",
                        panel_size=(5.4, 4.0))
    fewest = min(p.num_repeats for _, c in found for p in c.points)
    all_steps = sorted({c.num_steps for _, c in found})
    run_index = {label: i for i, label in enumerate(dict.fromkeys(label for label, _ in found))}
    for ax, temperature in zip(axes_grid(figure, len(temps))[0], temps):
        concurrencies: set[int] = set()
        for label, crossover in found:
            t = DEFAULT_TEMPERATURE if math.isnan(crossover.temperature) else crossover.temperature
            if t != temperature:
                continue
            style = line_style(run_index[label], crossover.num_steps, all_steps)
            color = style["color"]
            cs = [p.concurrency for p in crossover.points]
            ys = np.array([p.speedup for p in crossover.points])
            concurrencies.update(cs)
            ax.plot(cs, ys, label=f"{label} · k={crossover.num_steps}{crossover.shape}", **style)
            if all(p.low is not None and p.num_repeats >= MIN_INTERVAL_SAMPLES for p in crossover.points):
                yerr = np.array([[y - p.low, p.high - y] for y, p in zip(ys, crossover.points)]).T
                ax.errorbar(cs, ys, yerr=yerr, fmt="none", ecolor=color, capsize=3)
            if crossover.concurrency is not None:
                ax.axvline(crossover.concurrency, color=color, linestyle=":", alpha=0.7)
        ax.axhline(1.0, color="0.3", linewidth=1)
        concurrency_axis(ax, sorted(concurrencies))
        ax.set(ylabel="speedup (x)", title=temperature_title(temperature))
    shared_legend(figure)
    add_note(figure, interval_note(fewest))
    return NamedFigure("speedup_vs_concurrency", figure)
