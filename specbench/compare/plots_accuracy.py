"""GSM8K accuracy and answer agreement with k=0 per run: bars by num-steps, averaged over concurrency."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specbench.compare.plot_data import RunSeries, temperatures
from specbench.compare.plot_style import NamedFigure, axes_grid, new_figure, no_data, shared_legend, temperature_title

Panel = tuple[str, str | None, str]  # (column, stderr column, title)
ACCURACY_PANELS: tuple[Panel, ...] = (
    ("accuracy_strict", "accuracy_strict_stderr", "GSM8K accuracy, strict-match"),
    ("accuracy_flexible", "accuracy_flexible_stderr", "GSM8K accuracy, flexible-extract"),
    ("agreement_flexible", None, "same answer as k=0 (flexible)"),
)
Z_95 = 1.959964  # two-sided 95% normal quantile: error bars are intervals, not one stderr
TEXT_PANELS: tuple[Panel, ...] = (("agreement_text", None, "same text as k=0"),)


def accuracy_figure(series: Sequence[RunSeries]) -> NamedFigure:
    """Error bars: 95% normal intervals from the cells' mean stderr (sample std / sqrt(n)); speed-only workloads
    show text agreement."""
    has_accuracy = any((run.cells.get("accuracy_n", 0) > 0).any() for run in series)
    panels = ACCURACY_PANELS if has_accuracy else TEXT_PANELS
    temps = temperatures(series)
    title = "Accuracy and answer agreement per run" if has_accuracy else "Output agreement with k=0 per run"
    figure = new_figure(len(temps), len(panels), f"{title} (mean over concurrency; bars: 95% CI)")
    width = 0.8 / max(1, len(series))
    for row, temperature in zip(axes_grid(figure, len(panels)), temps):
        for ax, (column, stderr, name) in zip(row, panels):
            steps = sorted({int(k) for run in series for k in run.cells["num_steps"]})
            drawn = False
            for index, run in enumerate(series):
                cells = run.cells[run.cells["temperature"] == temperature]
                means = cells.groupby("num_steps")[[c for c in (column, stderr) if c]].mean()
                values = [100 * means[column].get(k, np.nan) for k in steps]
                if np.all(np.isnan(values)):
                    continue
                errors = [100 * Z_95 * means[stderr].get(k, np.nan) for k in steps] if stderr else None
                x = np.arange(len(steps)) + (index - (len(series) - 1) / 2) * width
                bars = ax.bar(x, values, width=width, yerr=errors, capsize=3, label=run.label, color=f"C{index}")
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
