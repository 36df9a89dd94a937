"""The metrics a comparison reports: table label, unit, direction of goodness, and how each one is resampled."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.compare import estimators as est
from specbench.compare.estimators import Estimator
from specbench.errors import SpecbenchError


class Resampling(enum.Enum):
    REQUESTS = "requests"  # bootstrap over requests (and repeats), metric recomputed per replicate
    ROUNDS = "rounds"  # bootstrap over requests as clusters of their draft rounds, counts pooled per replicate
    SPEEDUP = "speedup"  # ratio of two independently resampled cells (this one / its num-steps 0 cell)
    PAIRED = "paired"  # per-question outcomes paired on (sample_id, turn): sign test + paired bootstrap


class Delta(enum.Enum):
    RELATIVE = "relative"  # after / before - 1, shown in %
    ABSOLUTE = "absolute"  # after - before, shown in percentage points


@dataclass(frozen=True)
class Metric:
    name: str  # --metrics / --fail-on key
    label: str  # table row label (seed-004 wording)
    unit: str  # display unit
    scale: float  # display value = stored value x scale
    digits: int
    higher_is_better: bool
    resampling: Resampling
    delta: Delta
    group: str  # throughput | latency | acceptance | speedup | accuracy | agreement
    estimator: Estimator | None = None  # REQUESTS / ROUNDS
    outcome: str | None = None  # PAIRED: per-request outcome (see paired.py)
    needs_drafts: bool = False  # defined only for num-steps > 0 cells
    # ROUNDS acceptance metrics: the cells.parquet column holding the cell's value, used when its requests carry
    # no per-request counts (acceptance from /metrics counter deltas: per cell only, see cell_level.py)
    cell_column: str | None = None

    @property
    def title(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label


def _throughput(name: str, label: str, unit: str, estimator: Estimator, digits: int = 2) -> Metric:
    return Metric(name, label, unit, 1.0, digits, True, Resampling.REQUESTS, Delta.RELATIVE, "throughput", estimator)


def _latency(field: str, stat: str, label: str) -> Metric:
    name = f"{field.removesuffix('_s')}_{stat}"
    stat_label = {"mean": "Mean", "median": "Median", "p99": "P99"}[stat]
    return Metric(name, f"{stat_label} {label}", "ms", 1e3, 2, False, Resampling.REQUESTS, Delta.RELATIVE,
                  "latency", est.latency(field, stat))


def _acceptance(name: str, label: str, unit: str, scale: float, digits: int, estimator: Estimator,
                cell_column: str) -> Metric:
    return Metric(name, label, unit, scale, digits, True, Resampling.ROUNDS, Delta.RELATIVE, "acceptance",
                  estimator, needs_drafts=True, cell_column=cell_column)


def _paired(name: str, label: str, outcome: str, group: str, needs_drafts: bool = False) -> Metric:
    return Metric(name, label, "%", 100.0, 1, True, Resampling.PAIRED, Delta.ABSOLUTE, group,
                  outcome=outcome, needs_drafts=needs_drafts)


OUTPUT_THROUGHPUT = _throughput("output_throughput", "Output Throughput", "tok/s", est.output_throughput)
LATENCIES = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E Latency"))
BASE_METRICS: tuple[Metric, ...] = (
    OUTPUT_THROUGHPUT,
    _throughput("request_throughput", "Request Throughput", "req/s", est.request_throughput, digits=4),
    _throughput("total_throughput", "Total Token Throughput", "tok/s", est.total_throughput),
    *(_latency(field, stat, label) for stat in ("mean", "median", "p99") for field, label in LATENCIES),
    Metric("tokens_per_emission", "Tokens per Emission", "", 1.0, 3, True, Resampling.ROUNDS, Delta.RELATIVE,
           "acceptance", est.tokens_per_emission),
    _acceptance("acceptance_rate", "Acceptance Rate", "%", 100.0, 2, est.acceptance_rate, "acceptance_rate"),
    _acceptance("acceptance_length", "Acceptance Length", "", 1.0, 4, est.acceptance_length, "acceptance_length"),
)
# Goodput (metrics/goodput.py): only for runs swept with --goodput; compare resamples their successful requests.
GOODPUT_METRICS: tuple[Metric, ...] = (
    Metric("request_goodput", "Goodput", "req/s", 1.0, 4, True, Resampling.REQUESTS, Delta.RELATIVE, "goodput",
           est.request_goodput),
    Metric("output_goodput", "Output Goodput", "tok/s", 1.0, 2, True, Resampling.REQUESTS, Delta.RELATIVE, "goodput",
           est.output_goodput),
    Metric("good_request_fraction", "Good Requests", "%", 100.0, 1, True, Resampling.REQUESTS, Delta.ABSOLUTE,
           "goodput", est.good_request_fraction),
)
SPEEDUP = Metric("speedup", "Speedup vs k=0", "x", 1.0, 3, True, Resampling.SPEEDUP, Delta.RELATIVE, "speedup",
                 needs_drafts=True)
ACCURACY_METRICS: tuple[Metric, ...] = (
    _paired("accuracy_strict", "GSM8K Accuracy strict-match", "is_strict_match", "accuracy"),
    _paired("accuracy_flexible", "GSM8K Accuracy flexible-extract", "is_flexible_match", "accuracy"),
    _paired("agreement_strict", "Same Answer as k=0 (strict)", "same_strict", "agreement", needs_drafts=True),
    _paired("agreement_flexible", "Same Answer as k=0 (flexible)", "same_flexible", "agreement", needs_drafts=True),
    _paired("agreement_text", "Same Text as k=0", "same_text", "agreement", needs_drafts=True),
)


def position_metric(position: int) -> Metric:
    return _acceptance(f"accept_pos_{position}", f"Acceptance Rate pos {position}", "%", 100.0, 2,
                       est.accept_rate_at(position), f"accept_rate_pos_{position}")


def catalog(num_positions: int) -> tuple[Metric, ...]:
    """Every metric, in table order; per-position rows for positions 1..num_positions."""
    positions = tuple(position_metric(k) for k in range(1, num_positions + 1))
    return BASE_METRICS + GOODPUT_METRICS + positions + (SPEEDUP,) + ACCURACY_METRICS


GROUPS = ("throughput", "latency", "goodput", "acceptance", "speedup", "accuracy", "agreement")


def select(names: Sequence[str] | None, num_positions: int) -> tuple[Metric, ...]:
    """Metrics by name or group (catalog order kept); None = all. `accept_pos` selects every position."""
    metrics = catalog(num_positions)
    if not names:
        return metrics
    known = {m.name for m in metrics} | set(GROUPS) | {"accept_pos"}
    unknown = [n for n in names if n not in known and not n.startswith("accept_pos_")]
    if unknown:
        named = BASE_METRICS + GOODPUT_METRICS + (SPEEDUP,) + ACCURACY_METRICS
        supported = ", ".join([*GROUPS, *(m.name for m in named),
                               "accept_pos", "accept_pos_<k>"])
        raise SpecbenchError(f"unknown metric {', '.join(map(repr, unknown))}; supported: {supported}")
    wanted = set(names)
    return tuple(
        m for m in metrics
        if m.name in wanted or m.group in wanted or ("accept_pos" in wanted and m.name.startswith("accept_pos_"))
    )
