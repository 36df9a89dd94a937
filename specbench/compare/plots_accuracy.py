"""GSM8K accuracy and answer agreement with k=0 per run: bars by num-steps, averaged over concurrency, each with its
95% Wilson interval (inside [0, 100] %: a normal interval crosses 0 on a model that scores ~0)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specbench.compare.plot_data import RunSeries, temperatures
from specbench.compare.plot_style import (
    NamedFigure,
    axes_grid,
    interval_yerr,
    new_figure,
    no_data,
    run_color,
    shared_legend,
    temperature_title,
)
from specbench.metrics.proportion import wilson_interval

Panel = tuple[str, str, str]  # (column, column of its trial count, title)
ACCURACY_PANELS: tuple[Panel, ...] = (
    ("accuracy_strict", "accuracy_n", "GSM8K accuracy, strict-match"),
    ("accuracy_flexible", "accuracy_n", "GSM8K accuracy, flexible-extract"),
    ("agreement_flexible", "agreement_num_pairs", "same answer as k=0 (flexible)"),
)
TEXT_PANELS: tuple[Panel, ...] = (("agreement_text", "agreement_num_pairs", "same text as k=0"),)


def accuracy_figure(series: Sequence[RunSeries]) -> NamedFigure:
    """A bar per (run, k): the mean over concurrency of the cells' proportions, its interval the Wilson interval over
    one cell's requests (the cells of a k repeat the same prompts: their requests are not independent trials);
    speed-only workloads show text agreement."""
    has_accuracy = any((run.cells.get("accuracy_n", 0) > 0).any() for run in series)
    panels = ACCURACY_PANELS if has_accuracy else TEXT_PANELS
    temps = temperatures(series)
    title = "Accuracy and answer agreement per run" if has_accuracy else "Output agreement with k=0 per run"
    figure = new_figure(len(temps), len(panels), f"{title} (mean over concurrency; bars: 95% Wilson interval)")
    width = 0.8 / max(1, len(series))
    for row, temperature in zip(axes_grid(figure, len(panels)), temps):
        for ax, (column, count, name) in zip(row, panels):
            steps = sorted({int(k) for run in series for k in run.cells["num_steps"]})
            drawn = False
            for index, run in enumerate(series):
                cells = run.cells[run.cells["temperature"] == temperature]
                means = cells.groupby("num_steps")[[c for c in (column, count) if c in cells]].mean()
                values = np.array([means[column].get(k, np.nan) for k in steps], dtype=float)
                if np.all(np.isnan(values)):
                    continue
                trials = [means[count].get(k, 0) if count in means else 0 for k in steps]
                lows, highs = zip(*(wilson_interval(v, n) for v, n in zip(values, trials)))
                yerr = interval_yerr(100 * values, 100 * np.array(lows), 100 * np.array(highs))
                x = np.arange(len(steps)) + (index - (len(series) - 1) / 2) * width
                bars = ax.bar(x, 100 * values, width=width, yerr=yerr, capsize=3, label=run.label,
                              color=run_color(index))
                ax.bar_label(bars, fmt="%.0f", fontsize=8, padding=2)
                drawn = True
            if not drawn:
                no_data(ax, "scored requests")
                continue
            ax.set_xticks(range(len(steps)), [str(k) for k in steps])
            ax.set(xlabel="num-steps k", ylabel=f"{name.split(',')[0]} (%)",
                   title=f"{name}, {temperature_title(temperature)}")
            ax.set_ylim(0, 112)
            ax.grid(True, axis="y", alpha=0.3)
    shared_legend(figure)
    return NamedFigure("accuracy_agreement", figure)
