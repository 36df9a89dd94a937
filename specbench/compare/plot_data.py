"""Tidy per-run numbers behind the figures: cell means over repeats, and acceptance pooled over concurrency."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from specbench.compare.loading import Run
from specbench.compare.matching import DEFAULT_TEMPERATURE
from specbench.runs.cell_acceptance import cell_value
from specbench.runs.records import is_null
from specbench.runs.speedup_flags import speedup_mark

CELL_VALUES = (
    "output_throughput", "tpot_s_mean", "ttft_s_mean", "ttft_s_p99", "speedup", "acceptance_length",
    "accuracy_strict", "accuracy_strict_stderr", "accuracy_flexible", "accuracy_flexible_stderr",
    "agreement_flexible", "agreement_text", "accuracy_n", "agreement_num_pairs", "request_goodput",
    "good_request_fraction",
)
# fewer samples than this draw no interval: a t-interval over 2 repeats (t = 12.7) swamps the data it brackets
MIN_INTERVAL_SAMPLES = 3


@dataclass(frozen=True)
class RunSeries:
    label: str  # legend name: the run's --label (run id appended when two runs share a label)
    # one row per (temperature, concurrency, num_steps): CELL_VALUES averaged over repeats; `{value}_low` and
    # `{value}_high`: the 95% ratio interval of that mean over repeats (the t-interval of the mean log value, around
    # the mean: never below 0; NaN with fewer than MIN_INTERVAL_SAMPLES repeats or a value <= 0); `repeats`; and
    # `speedup_flag`: the sweep's marks on that speedup (runs/speedup_flags.py), "" when none
    cells: pd.DataFrame
    acceptance: pd.DataFrame  # one row per (temperature, num_steps > 0): acceptance_length, accept_rate_pos_{k}
    # (from cells.parquet: every acceptance_source, HTTP /metrics deltas included), each with `{value}_ci`: the
    # half-width of the 95% t-interval over the cells pooled (concurrency x repeats; NaN with fewer than
    # MIN_INTERVAL_SAMPLES cells)


def run_series(runs: Sequence[Run]) -> list[RunSeries]:
    labels = [r.label for r in runs]
    return [
        RunSeries(
            # a mutant (fault-injected) or synthetic-acceptance run says so in every legend
            " ".join(filter(None, (label if labels.count(label) == 1 else f"{label} ({run.info.run_id})",
                                   run.info.engine_note))),
            _cell_means(chain_cells(run.cells)),
            _pooled_acceptance(chain_cells(run.cells)),
        )
        for run, label in zip(runs, labels)
    ]


def chain_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells that drafted chains (all of a run without tree shapes): the figures' axes are k, and a tree cell of
    the same k is another configuration, never averaged in (tree shapes are compared in tables: compare, summary)."""
    return cells if "eagle_topk" not in cells else cells[cells["eagle_topk"].fillna(1) == 1]


def _temperature(frame: pd.DataFrame) -> pd.Series:
    return frame["temperature"].fillna(DEFAULT_TEMPERATURE)


def _cell_means(cells: pd.DataFrame) -> pd.DataFrame:
    frame = cells.assign(temperature=_temperature(cells))
    present = [c for c in CELL_VALUES if c in frame.columns]
    keys = ["temperature", "concurrency", "num_steps"]
    groups = frame.groupby(keys)[present]
    mean = groups.mean()
    logs = np.log(frame[present].where(frame[present] > 0)).join(frame[keys]).groupby(keys)
    count, positive = groups.count(), groups.min() > 0
    half = (logs.sem() * stats.t.ppf(0.975, (count - 1).clip(lower=1))).where(
        (count >= MIN_INTERVAL_SAMPLES) & positive)
    flags = frame.groupby(keys).apply(lambda g: speedup_mark(g.to_dict("records")).strip(), include_groups=False)
    return (mean.join((mean * np.exp(-half)).add_suffix("_low")).join((mean * np.exp(half)).add_suffix("_high"))
            .assign(repeats=frame.groupby(keys).size(), speedup_flag=flags).reset_index())


def _pooled_acceptance(cells: pd.DataFrame) -> pd.DataFrame:
    """AL = 1 + sum A / sum D and p_k = sum A_k / sum D over the (temperature, k) cells' own acceptance columns,
    whatever their acceptance_source (engine, response bodies or /metrics deltas: the same family). A cell with
    rounds but no accepted count (SGLang's counters) weighs its acceptance_length by its rounds."""
    frame = cells[cells["num_steps"] > 0].assign(temperature=_temperature(cells))
    rows = []
    for (temperature, num_steps), group in frame.groupby(["temperature", "num_steps"]):
        records = [r for r in group.to_dict("records")
                   if not is_null(r["num_draft_rounds"]) and r["num_draft_rounds"] > 0]
        rounds = float(sum(r["num_draft_rounds"] for r in records))
        if not rounds:
            continue
        weights = [float(r["num_draft_rounds"]) for r in records]
        row = {"temperature": temperature, "num_steps": int(num_steps)}
        for column in ("acceptance_length", *(f"accept_rate_pos_{k}" for k in range(1, int(num_steps) + 1))):
            row[column], row[f"{column}_ci"] = weighted_mean_ci([cell_value(r, column) for r in records], weights)
        rows.append(row)
    return pd.DataFrame(rows, columns=["temperature", "num_steps", "acceptance_length"] if not rows else None)


def weighted_mean_ci(values: Sequence[float], weights: Sequence[float]) -> tuple[float, float]:
    """The rounds-weighted mean of the values and the half-width of its 95% t-interval: each value (a cell: one
    concurrency, one repeat; or a request: bench/sampling_split.py) is one measurement of the same acceptance, weighed
    by its draft rounds; the ratio estimator's variance is
    sum w_i^2 (x_i - mean)^2 / (sum w)^2 x n / (n - 1) (NaN with fewer than MIN_INTERVAL_SAMPLES cells)."""
    x, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    mean = float((w * x).sum() / w.sum())
    n = len(x)
    if n < MIN_INTERVAL_SAMPLES:
        return mean, float("nan")
    variance = float((w**2 * (x - mean) ** 2).sum() / w.sum() ** 2 * n / (n - 1))
    return mean, float(np.sqrt(variance) * stats.t.ppf(0.975, n - 1))


def temperatures(series: Sequence[RunSeries]) -> list[float]:
    return sorted({float(t) for s in series for t in s.cells["temperature"]})


def min_repeats(series: Sequence[RunSeries]) -> int:
    """The fewest repeats behind any plotted mean (figures without intervals say so when below
    MIN_INTERVAL_SAMPLES)."""
    return min((int(s.cells["repeats"].min()) for s in series if not s.cells.empty), default=0)


def interval_note(fewest: int, what: str = "repeats") -> str:
    """The line a figure adds when some of its means rest on too few samples for an interval."""
    if fewest >= MIN_INTERVAL_SAMPLES:
        return ""
    return f"no interval where fewer than {MIN_INTERVAL_SAMPLES} {what}; fewest here: {fewest}"
