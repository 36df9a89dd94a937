"""Shared look of the figures: one colour per run, one marker per num-steps, legends and notes inside the canvas,
intervals that stay inside what a quantity can be, readable sizes, Agg only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import textwrap

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # pyplot-free: no GUI backend or global state; savefig renders with Agg

from specbench.compare.matching import format_temperature

LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")
RC = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 8, "figure.dpi": 100}


@dataclass(frozen=True)
class NamedFigure:
    name: str  # file stem, e.g. "throughput_tpot_vs_concurrency"
    figure: Figure


def new_figure(num_rows: int, num_cols: int, title: str, panel_size: tuple[float, float] = (5.0, 3.6)) -> Figure:
    with matplotlib.rc_context(RC):
        figure = Figure(figsize=(panel_size[0] * num_cols, panel_size[1] * num_rows + 0.6), layout="constrained")
        figure.subplots(num_rows, num_cols, squeeze=False)
        figure.suptitle(title, fontsize=13)
    return figure


def axes_grid(figure: Figure, num_cols: int) -> list[list[Axes]]:
    flat = figure.axes
    return [flat[i : i + num_cols] for i in range(0, len(flat), num_cols)]


def run_color(index: int) -> str:
    return f"C{index % 10}"


def line_style(run_index: int, num_steps: int, all_steps: Sequence[int]) -> dict:
    """A (run, k) curve: the run's colour, k's marker (and line style, for print in grey)."""
    step = sorted(all_steps).index(num_steps)
    return {"color": run_color(run_index), "marker": MARKERS[step % len(MARKERS)],
            "linestyle": LINE_STYLES[step % len(LINE_STYLES)]}


def bounded_yerr(values: Sequence[float], half: Sequence[float], low: float = 0.0,
                 high: float = np.inf) -> np.ndarray | None:
    """Asymmetric error bars of +/- half clipped to [low, high] (what the quantity can be: a rate in [0, 100], an
    acceptance length in [1, k + 1]); None when no value has an interval (NaN half-widths draw no bar)."""
    v, h = np.asarray(values, dtype=float), np.asarray(half, dtype=float)
    if np.isnan(h).all():
        return None
    h = np.nan_to_num(h)
    return np.vstack([v - np.clip(v - h, low, high), np.clip(v + h, low, high) - v])


def interval_yerr(values: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> np.ndarray | None:
    """Error bars from interval ends (NaN ends: no bar); None when no value has an interval."""
    v, lo, hi = (np.asarray(x, dtype=float) for x in (values, lows, highs))
    if np.isnan(lo).all():
        return None
    return np.vstack([np.nan_to_num(v - lo), np.nan_to_num(hi - v)])


def temperature_title(temperature: float) -> str:
    return f"temperature {format_temperature(temperature)}"


def concurrency_axis(ax: Axes, values: Sequence[int]) -> None:
    values = sorted(set(values))
    if values and values[-1] / max(values[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(values, [str(v) for v in values])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.grid(True, alpha=0.3)


def shared_legend(figure: Figure) -> None:
    """One legend for the whole figure, below the panels (per-panel legends hide data), in as many columns as fit
    the figure's width (long run labels in six columns ran past both edges)."""
    seen: dict[str, object] = {}
    for ax in figure.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if not seen:
        return
    canvas = FigureCanvasAgg(figure)
    for ncols in range(min(len(seen), 6), 0, -1):
        legend = figure.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=ncols, fontsize=9,
                               frameon=False)
        if ncols == 1 or legend.get_window_extent(canvas.get_renderer()).width <= figure.bbox.width * 0.98:
            return
        legend.remove()


def add_note(figure: Figure, note: str) -> None:
    """A line under the figure's title (e.g. why no interval is drawn): inside the canvas, wrapped by fit_titles."""
    if note:
        figure.suptitle(f"{figure.get_suptitle()}\n{note}", fontsize=13)


def no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def fit_titles(figure: Figure) -> None:
    """Wrap the figure title and every panel title that is wider than its room (the figure, or its panel), so
    none is cut at the edge of the PNG; each of a title's own lines (a note under it) is wrapped apart; layout is
    recomputed around the wrapped lines."""
    canvas = FigureCanvasAgg(figure)
    originals: dict[int, str] = {}  # each wrapped text as it was set, its own line breaks kept
    for _ in range(4):  # wrapping changes the layout, which changes the room: settle in a few passes
        canvas.draw()
        renderer = canvas.get_renderer()
        changed = False
        suptitle = figure._suptitle  # the Text itself (get_suptitle gives only its string)
        texts = [(suptitle, figure.bbox.width * 0.96)] if suptitle is not None else []
        texts += [(ax.title, ax.get_window_extent(renderer).width) for ax in figure.axes if ax.get_title()]
        for text, room in texts:
            width = text.get_window_extent(renderer).width
            if width > room:
                original = originals.setdefault(id(text), text.get_text())
                longest = max(len(line) for line in text.get_text().split("\n"))  # the line that sets the width
                chars = max(12, int(longest * room / width) - 1)
                lines = original.split("\n")
                text.set_text("\n".join(textwrap.fill(" ".join(line.split()), chars) for line in lines))
                changed = True
        if not changed:
            return


def save_figures(figures: Sequence[NamedFigure], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for named in figures:
        path = out / f"{named.name}.png"
        named.figure.savefig(path, dpi=110, bbox_inches="tight")  # nothing drawn is cut at the canvas edge
        paths.append(path)
    return paths
