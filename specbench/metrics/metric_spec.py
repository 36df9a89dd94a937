"""What a metric spec declares (metrics/specs.py holds the specs themselves): the spec, its noise kind and
direction, the latency family it may belong to, and a row of the sweep summary."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specbench.metrics.pooled import Pooled


class Resampling(enum.Enum):
    """The noise kind of a metric: how compare resamples it."""

    REQUESTS = "requests"  # bootstrap over requests (and repeats), metric recomputed per replicate
    ROUNDS = "rounds"  # bootstrap over requests as clusters of their draft rounds, counts pooled per replicate
    SPEEDUP = "speedup"  # ratio of two independently resampled cells (this one / its num-steps 0 cell)
    PAIRED = "paired"  # per-question outcomes paired on (sample_id, turn): sign test + paired bootstrap


class Delta(enum.Enum):
    RELATIVE = "relative"  # after / before - 1, shown in %
    ABSOLUTE = "absolute"  # after - before, shown in percentage points


class Direction(enum.Enum):
    HIGHER = "higher"  # higher is better
    LOWER = "lower"


@dataclass(frozen=True)
class MetricSpec:
    name: str  # --metrics / --fail-on key
    label: str  # compare table row label (seed-004 wording); the summary and plots derive theirs from it
    unit: str  # display unit
    scale: float  # display value = stored value x scale
    digits: int
    direction: Direction
    resampling: Resampling
    delta: Delta
    group: str  # throughput | latency | goodput | acceptance | speedup | accuracy | agreement
    doc: str = ""  # meaning of its cells.parquet column (schema docs); "": documented with its family
    column_name: str | None = None  # cells.parquet column when it is not `name`
    # The computation, one of: from pooled counts (cell value = identity draw, compare = each bootstrap draw) ...
    pooled: Callable[[Pooled], np.ndarray] | None = None  # -> [num_draws], NaN where undefined
    # ... a statistic ("mean" | "median" | "p99") of a per-request RequestMetrics field (ITL: pooled gaps) ...
    per_request: str | None = None
    stat: str | None = None
    # ... or (PAIRED) the mean of a per-request outcome (compare/paired.py)
    outcome: str | None = None
    needs_drafts: bool = False  # defined only for num-steps > 0 cells

    @property
    def column(self) -> str:
        return self.column_name or self.name

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER

    @property
    def title(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label

    @property
    def cell_column(self) -> str | None:
        """Acceptance metrics: the column compare falls back to when the cell's requests carry no per-request
        counts (acceptance from /metrics counter deltas: per cell only, see compare/cell_level.py)."""
        return self.column if self.resampling is Resampling.ROUNDS and self.needs_drafts else None

    @property
    def plot_label(self) -> str:
        """Axis label: the label in lower case, unit appended ("mean TTFT (ms)")."""
        words = [_lower_title_word(w) for w in self.label.split()]
        return f"{' '.join(words)} ({self.unit})" if self.unit else " ".join(words)

    def cell_value(self, pooled: Pooled) -> float | None:
        """The cell's value from its one identity draw; None where undefined."""
        if self.pooled is None:
            raise ValueError(f"{self.name} is not computed from pooled counts")
        value = float(self.pooled(pooled)[0])
        return None if np.isnan(value) else value


def _lower_title_word(word: str) -> str:
    """"Throughput" -> "throughput"; acronyms and codes ("TTFT", "P99", "k=0") stay."""
    return word.lower() if word[:1].isupper() and word[1:].islower() else word


def sentence_case(label: str) -> str:
    """"Output Throughput" -> "Output throughput": the first word kept, later title-case words lowered."""
    first, *rest = label.split()
    return " ".join([first, *map(_lower_title_word, rest)])


@dataclass(frozen=True)
class Latency:
    """A per-request latency field and the statistics cells.parquet keeps of it (`{field}_{stat}`)."""

    field: str  # RequestMetrics field (seconds)
    label: str  # compare label stem ("Mean TTFT")
    doc: str  # what the schema docs call it

    def metric(self, stat: str) -> MetricSpec:
        stat_label = {"mean": "Mean", "median": "Median", "p99": "P99"}[stat]
        return MetricSpec(f"{self.field.removesuffix('_s')}_{stat}", f"{stat_label} {self.label}", "ms", 1e3, 2,
                          Direction.LOWER, Resampling.REQUESTS, Delta.RELATIVE, "latency",
                          column_name=f"{self.field}_{stat}", per_request=self.field, stat=stat)


@dataclass(frozen=True)
class SummaryRow:
    """A row of the sweep's terminal summary (bench/summary_table.py). Its text: the metric's label in sentence
    case (or `label`), then its unit, unless the row shows the stored fraction (`is_fraction`, no scale)."""

    metric: MetricSpec | None  # None: a family's row, one value per index (`family`)
    label: str | None = None
    digits: int | None = None  # default: the metric's
    is_fraction: bool = False
    show_unit: bool = True
    # metric None: which family the row lists, "position" (position_metric, k = 1..num_steps), "depth"
    # (depth_metric, d = 1..num_steps) or "rank" (rank_metric, r = 0..eagle_topk - 1)
    family: str = "position"

    @property
    def text(self) -> str:
        if self.metric is None:
            return self.label or "Per-position acceptance (%)"
        stem = self.label or sentence_case(self.metric.label)
        with_unit = self.metric.unit and self.show_unit and not self.is_fraction
        return f"{stem} ({self.metric.unit})" if with_unit else stem

    @property
    def scale(self) -> float:
        return 1.0 if self.metric is None or self.is_fraction else self.metric.scale

    @property
    def num_digits(self) -> int:
        return self.digits if self.digits is not None else self.metric.digits if self.metric else 0
