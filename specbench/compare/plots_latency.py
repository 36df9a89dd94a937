"""Throughput, TPOT and TTFT against concurrency: a row per temperature, a line per (run, num-steps) (the run's colour,
k's marker); error bars: the 95% ratio interval of the mean over repeats (plot_data: never below 0; none with fewer
than MIN_INTERVAL_SAMPLES repeats, which the title then says)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes

from specbench.compare.plot_data import RunSeries, interval_note, min_repeats, temperatures
from specbench.compare.plot_style import (
    NamedFigure,
    add_note,
    axes_grid,
    concurrency_axis,
    interval_yerr,
    line_style,
    new_figure,
    no_data,
    shared_legend,
    temperature_title,
)
from specbench.metrics.metric_spec import MetricSpec
from specbench.metrics.specs import (
    GOOD_REQUEST_FRACTION,
    OUTPUT_THROUGHPUT,
    REQUEST_GOODPUT,
    TPOT,
    TTFT,
)

Panel = tuple[str, float, str]  # (cells column, display scale, y-axis label)


def _lines(ax: Axes, series: Sequence[RunSeries], temperature: float, panel: Panel) -> None:
    column, scale, ylabel = panel
    all_steps = sorted({int(k) for s in series for k in s.cells["num_steps"]})
    concurrencies: set[int] = set()
    for index, run in enumerate(series):
        cells = run.cells[run.cells["temperature"] == temperature]
        for num_steps, group in cells.groupby("num_steps"):
            group = group.dropna(subset=[column]).sort_values("concurrency")
            if group.empty:
                continue
            concurrencies.update(int(c) for c in group["concurrency"])
            style = line_style(index, int(num_steps), all_steps)
            ax.plot(group["concurrency"], group[column] * scale, label=f"{run.label} · k={num_steps}", **style)
            yerr = interval_yerr(group[column], group[f"{column}_low"], group[f"{column}_high"])
            if yerr is not None:
                ax.errorbar(group["concurrency"], group[column] * scale, yerr=yerr * scale, fmt="none",
                            ecolor=style["color"], capsize=3)
    if not concurrencies:
        no_data(ax, "data")
        return
    concurrency_axis(ax, sorted(concurrencies))
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)


def _figure(series: Sequence[RunSeries], name: str, title: str, panels: Sequence[Panel]) -> NamedFigure:
    temps = temperatures(series)
    figure = new_figure(len(temps), len(panels), title)
    for row, temperature in zip(axes_grid(figure, len(panels)), temps):
        for ax, panel in zip(row, panels):
            _lines(ax, series, temperature, panel)
            ax.set_title(f"{panel[2].split(' (')[0]}, {temperature_title(temperature)}")
    shared_legend(figure)
    add_note(figure, interval_note(min_repeats(series)))
    return NamedFigure(name, figure)


def _panel(metric: MetricSpec) -> Panel:
    return metric.column, metric.scale, metric.plot_label


def throughput_tpot_figure(series: Sequence[RunSeries]) -> NamedFigure:
    panels = (_panel(OUTPUT_THROUGHPUT), _panel(TPOT.metric("mean")))
    return _figure(series, "throughput_tpot_vs_concurrency",
                   "Output throughput and TPOT vs concurrency (one line per run and num-steps k)", panels)


def ttft_figure(series: Sequence[RunSeries]) -> NamedFigure:
    panels = (_panel(TTFT.metric("mean")), _panel(TTFT.metric("p99")))
    return _figure(series, "ttft_vs_concurrency", "Time to first token vs concurrency", panels)


def goodput_figure(series: Sequence[RunSeries]) -> NamedFigure | None:
    """Goodput and the share of good requests vs concurrency; None when no run was swept with --goodput."""
    column = REQUEST_GOODPUT.column
    if not any(s.cells[column].notna().any() for s in series if column in s.cells):
        return None
    panels = (_panel(REQUEST_GOODPUT), _panel(GOOD_REQUEST_FRACTION))
    return _figure(series, "goodput_vs_concurrency", "Goodput (requests meeting every SLO bound) vs concurrency",
                   panels)
