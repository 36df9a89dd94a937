"""Every reported metric, declared once: name, cells.parquet column, label, unit, direction, how compare resamples
it, and its computation. The schema docs (runs/schema.py), the compare catalog (compare/metrics_catalog.py), the
sweep's summary table (bench/summary_table.py) and the plots' axis labels read these; CellMetrics and compare's
estimators both evaluate `pooled` (metrics/pooled.py), so a cell's value and its bootstrap replicates are one
computation. Definitions, and the formulas every other consumer calls too: metrics/definitions.py.

A new metric column: declare it here (a `MetricSpec`, in `BASE_METRICS` or a sibling, plus a `SummaryRow` to show
it in the sweep summary), name its column in runs/schema.py's CELL_COLUMNS, and, only if it needs a per-request
count not yet summed, add that count to metrics/pooled.py. A formula that code outside the spec computes too (per
request, from a row, from a server's counters) is written once in metrics/definitions.py and called from both.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from specbench.metrics import definitions
from specbench.metrics.metric_spec import (
    Delta,
    Direction,
    Latency,
    MetricSpec,
    Resampling,
    SummaryRow,
)
from specbench.metrics.pooled import Pooled, ratio, where_positive


def _per_second(count: Callable[[Pooled], np.ndarray]) -> Callable[[Pooled], np.ndarray]:
    return lambda p: ratio(count(p), p.window_s)


def _acceptance_length(p: Pooled) -> np.ndarray:
    """Token-weighted 1 + A / D; 1.0 without draft rounds (as the cell tables report it), NaN where the
    per-request counts are unknown (HTTP)."""
    rounds = p.num_draft_rounds
    no_drafts = np.where(np.isnan(rounds), np.nan, 1.0)
    return np.where(rounds > 0, where_positive(definitions.acceptance_length, p.num_accepted_tokens, rounds),
                    no_drafts)


def _throughput(name: str, label: str, unit: str, doc: str, count: Callable[[Pooled], np.ndarray],
                digits: int = 2) -> MetricSpec:
    return MetricSpec(name, label, unit, 1.0, digits, Direction.HIGHER, Resampling.REQUESTS, Delta.RELATIVE,
                      "throughput", doc, pooled=_per_second(count))


TTFT = Latency("ttft_s", "TTFT", "TTFT")
TPOT = Latency("tpot_s", "TPOT", "TPOT")
ITL = Latency("itl_s", "ITL", "ITL (gap between emissions)")
E2E = Latency("e2e_s", "E2E Latency", "E2E latency")
LATENCIES = (TTFT, TPOT, ITL, E2E)
COMPARED_STATS = ("mean", "median", "p99")  # of the cells' mean, median, p90, p99, std

OUTPUT_THROUGHPUT = _throughput("output_throughput", "Output Throughput", "tok/s", "output tokens / duration_s",
                                lambda p: p.num_output_tokens)
REQUEST_THROUGHPUT = _throughput("request_throughput", "Request Throughput", "req/s", "requests / duration_s",
                                 lambda p: p.num_requests, digits=4)
TOTAL_THROUGHPUT = _throughput("total_throughput", "Total Token Throughput", "tok/s",
                               "(prompt + output) tokens / duration_s",
                               lambda p: p.num_prompt_tokens + p.num_output_tokens)
TOKENS_PER_EMISSION = MetricSpec(
    "tokens_per_emission", "Tokens per Emission", "", 1.0, 3, Direction.HIGHER, Resampling.ROUNDS, Delta.RELATIVE,
    "acceptance", "pooled output tokens / emissions",
    pooled=lambda p: where_positive(definitions.tokens_per_emission, p.num_output_tokens, p.num_emissions))
ACCEPTANCE_RATE = MetricSpec(
    "acceptance_rate", "Acceptance Rate", "%", 100.0, 2, Direction.HIGHER, Resampling.ROUNDS, Delta.RELATIVE,
    "acceptance", "A / T_d; null without drafts",
    pooled=lambda p: where_positive(definitions.acceptance_rate, p.num_accepted_tokens, p.num_draft_tokens),
    needs_drafts=True)
ACCEPTANCE_LENGTH = MetricSpec(
    "acceptance_length", "Acceptance Length", "", 1.0, 4, Direction.HIGHER, Resampling.ROUNDS, Delta.RELATIVE,
    "acceptance", "token-weighted AL = 1 + A / D", pooled=_acceptance_length, needs_drafts=True)
BASE_METRICS: tuple[MetricSpec, ...] = (
    OUTPUT_THROUGHPUT,
    REQUEST_THROUGHPUT,
    TOTAL_THROUGHPUT,
    *(latency.metric(stat) for stat in COMPARED_STATS for latency in LATENCIES),
    TOKENS_PER_EMISSION,
    ACCEPTANCE_RATE,
    ACCEPTANCE_LENGTH,
)



def _goodput(name: str, label: str, unit: str, scale: float, digits: int, delta: Delta, doc: str,
             pooled: Callable[[Pooled], np.ndarray]) -> MetricSpec:
    return MetricSpec(name, label, unit, scale, digits, Direction.HIGHER, Resampling.REQUESTS, delta, "goodput",
                      doc, pooled=pooled)


# Goodput (metrics/goodput.py): only for runs swept with --goodput; compare resamples their successful requests.
REQUEST_GOODPUT = _goodput("request_goodput", "Goodput", "req/s", 1.0, 4, Delta.RELATIVE,
                           "good requests / duration_s", _per_second(lambda p: p.num_good_requests))
OUTPUT_GOODPUT = _goodput("output_goodput", "Output Goodput", "tok/s", 1.0, 2, Delta.RELATIVE,
                          "output tokens of good requests / duration_s",
                          _per_second(lambda p: p.num_good_output_tokens))
GOOD_REQUEST_FRACTION = _goodput("good_request_fraction", "Good Requests", "%", 100.0, 1, Delta.ABSOLUTE,
                                 "good / all measured requests (failed ones count as not good)",
                                 lambda p: ratio(p.num_good_requests, p.num_requests))
GOODPUT_METRICS: tuple[MetricSpec, ...] = (REQUEST_GOODPUT, OUTPUT_GOODPUT, GOOD_REQUEST_FRACTION)

# Computed from two cells, not pooled counts: definitions.speedup (CellMetrics' speedup, compare's replicates).
SPEEDUP = MetricSpec("speedup", "Speedup vs k=0", "x", 1.0, 3, Direction.HIGHER, Resampling.SPEEDUP,
                     Delta.RELATIVE, "speedup", "output_throughput / baseline output_throughput", needs_drafts=True)


def over_repeats(values: Sequence[float | None]) -> float | None:
    """THE way a grid point's repeats combine into one speed value or speed ratio: the geometric mean of the
    positive finite per-repeat values (None: none). Speed varies multiplicatively (a load, a clock), and with it
    one speedup has one value wherever it is printed: the geometric mean of the per-repeat speedups is the ratio
    of the geometric means of the per-repeat throughputs (sweep summary, best-k line, crossover, compare)."""
    logs = [math.log(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def _paired(name: str, label: str, outcome: str, group: str, doc: str, needs_drafts: bool = False) -> MetricSpec:
    return MetricSpec(name, label, "%", 100.0, 1, Direction.HIGHER, Resampling.PAIRED, Delta.ABSOLUTE, group, doc,
                      outcome=outcome, needs_drafts=needs_drafts)


ACCURACY_STRICT = _paired("accuracy_strict", "GSM8K Accuracy strict-match", "is_strict_match", "accuracy",
                          "exact match, strict-match filter")
ACCURACY_FLEXIBLE = _paired("accuracy_flexible", "GSM8K Accuracy flexible-extract", "is_flexible_match", "accuracy",
                            "exact match, flexible-extract filter")
AGREEMENT_STRICT = _paired("agreement_strict", "Same Answer as k=0 (strict)", "same_strict", "agreement",
                           "fraction with equal normalised strict answers", needs_drafts=True)
AGREEMENT_FLEXIBLE = _paired("agreement_flexible", "Same Answer as k=0 (flexible)", "same_flexible", "agreement",
                             "fraction with equal normalised flexible answers", needs_drafts=True)
AGREEMENT_TEXT = _paired("agreement_text", "Same Text as k=0", "same_text", "agreement",
                         "fraction with identical output text", needs_drafts=True)
ACCURACY_METRICS: tuple[MetricSpec, ...] = (
    ACCURACY_STRICT, ACCURACY_FLEXIBLE, AGREEMENT_STRICT, AGREEMENT_FLEXIBLE, AGREEMENT_TEXT)

POSITION_COLUMN = "accept_rate_pos_{k}"  # cells.parquet column of draft position k (1-based)
POSITION_DOC = "A_k / D: rounds accepting draft position k per round"


@functools.cache  # one spec per position, so specs compare equal wherever they were looked up
def position_metric(position: int) -> MetricSpec:
    """p_k = A_k / D for 1-based draft position k (cells.parquet `accept_rate_pos_{k}`)."""
    return MetricSpec(f"accept_pos_{position}", f"Acceptance Rate pos {position}", "%", 100.0, 2, Direction.HIGHER,
                      Resampling.ROUNDS, Delta.RELATIVE, "acceptance", POSITION_DOC,
                      column_name=POSITION_COLUMN.format(k=position), needs_drafts=True,
                      pooled=lambda p: where_positive(definitions.position_acceptance_rate,
                                                      p.num_accepted_at(position), p.num_draft_rounds))


# Tree drafts (--eagle-topk > 1; counts: speculation/verify/tree_stats.py). The mean acceptance length per round is
# ACCEPTANCE_LENGTH (1 + A / D over tree rounds too); these add the tree's size and where its path went. Undefined
# (N/A) for chain cells: no request drafted a tree.
TREE_SIZE = MetricSpec(
    "tree_size", "Mean Tree Size", "", 1.0, 2, Direction.LOWER, Resampling.ROUNDS, Delta.RELATIVE, "tree",
    "drafted tree nodes per tree round (root excluded; fewer = less verify work); null for chains",
    pooled=lambda p: ratio(p.num_tree_nodes, p.num_tree_rounds), needs_drafts=True)
TREE_METRICS: tuple[MetricSpec, ...] = (TREE_SIZE,)
# The columns CellMetrics.to_row fills from its pooled counts (goodput's come from the request rows' --goodput
# flags, failed requests included: bench/cell_summary.py).
CELL_POOLED_METRICS = tuple(metric for metric in BASE_METRICS + TREE_METRICS if metric.pooled is not None)
TREE_DEPTH_RATES = "tree_accept_rate_per_depth"  # cells.parquet list columns the families read
TREE_RANK_RATES = "tree_accept_rate_per_rank"
DEPTH_COLUMN = "tree_accept_rate_depth_{d}"  # cells.parquet: read from tree_accept_rate_per_depth[d - 1]
RANK_COLUMN = "tree_accept_rate_rank_{r}"  # cells.parquet: read from tree_accept_rate_per_rank[r]
DEPTH_DOC = ("[max depth] tree rounds whose accepted path continued to depth d over those that reached depth d - 1 "
             "with a child to try (d = 1: the root's children); null for chains")
RANK_DOC = ("[max topk] accepted path steps through a child of sibling rank r (0 = the drafter's best) over path "
            "nodes that had such a child; null for chains")


@functools.cache
def depth_metric(depth: int) -> MetricSpec:
    """Tree acceptance at 1-based draft depth d: accepted / offered at that depth."""
    return MetricSpec(f"tree_accept_depth_{depth}", f"Tree Acceptance depth {depth}", "%", 100.0, 2,
                      Direction.HIGHER, Resampling.ROUNDS, Delta.RELATIVE, "tree", DEPTH_DOC,
                      column_name=DEPTH_COLUMN.format(d=depth), needs_drafts=True,
                      pooled=lambda p: ratio(p.tree_accepted_at_depth(depth), p.tree_offered_at_depth(depth)))


@functools.cache
def rank_metric(rank: int) -> MetricSpec:
    """Tree acceptance through the child of sibling rank r (0-based): accepted / offered at that rank."""
    return MetricSpec(f"tree_accept_rank_{rank}", f"Tree Acceptance rank {rank}", "%", 100.0, 2,
                      Direction.HIGHER, Resampling.ROUNDS, Delta.RELATIVE, "tree", RANK_DOC,
                      column_name=RANK_COLUMN.format(r=rank), needs_drafts=True,
                      pooled=lambda p: ratio(p.tree_accepted_at_rank(rank), p.tree_offered_at_rank(rank)))


def catalog(num_positions: int, max_topk: int = 1) -> tuple[MetricSpec, ...]:
    """Every metric, in compare's table order; per-position rows for positions 1..num_positions; with tree cells
    (max_topk > 1) the tree families too, per depth 1..num_positions and per rank 0..max_topk - 1 (the tree metrics
    are undefined for chains: compare shows no row for them there)."""
    positions = tuple(position_metric(k) for k in range(1, num_positions + 1))
    trees = TREE_METRICS
    if max_topk > 1:
        trees += tuple(depth_metric(d) for d in range(1, num_positions + 1)) + tuple(rank_metric(r)
                                                                                     for r in range(max_topk))
    return BASE_METRICS + GOODPUT_METRICS + positions + trees + (SPEEDUP,) + ACCURACY_METRICS


# all but the per-position, per-depth and per-rank families
NAMED_METRICS = BASE_METRICS + GOODPUT_METRICS + TREE_METRICS + (SPEEDUP,) + ACCURACY_METRICS
GROUPS = ("throughput", "latency", "goodput", "acceptance", "tree", "speedup", "accuracy", "agreement")


SUMMARY_ROWS: tuple[SummaryRow, ...] = (
    SummaryRow(OUTPUT_THROUGHPUT),
    SummaryRow(REQUEST_THROUGHPUT, digits=3),
    SummaryRow(TTFT.metric("mean")),
    SummaryRow(TTFT.metric("p99")),
    SummaryRow(TPOT.metric("mean")),
    SummaryRow(TPOT.metric("p99")),
    SummaryRow(ITL.metric("mean")),
    SummaryRow(TOKENS_PER_EMISSION, digits=2),
    SummaryRow(ACCEPTANCE_RATE, digits=1),
    SummaryRow(ACCEPTANCE_LENGTH, digits=3),
    SummaryRow(None),
    SummaryRow(SPEEDUP, show_unit=False),
    SummaryRow(AGREEMENT_TEXT, digits=3, is_fraction=True),
)
SUMMARY_GOODPUT_ROWS: tuple[SummaryRow, ...] = (  # runs swept with --goodput
    SummaryRow(REQUEST_GOODPUT, digits=3),
    SummaryRow(OUTPUT_GOODPUT, label="Goodput"),
    SummaryRow(GOOD_REQUEST_FRACTION),
)
SUMMARY_ACCURACY_ROWS: tuple[SummaryRow, ...] = (  # scored workloads (gsm8k); accuracy shown with its stderr
    SummaryRow(ACCURACY_STRICT, label="Accuracy strict-match", digits=3, is_fraction=True),
    SummaryRow(ACCURACY_FLEXIBLE, label="Accuracy flexible-extract", digits=3, is_fraction=True),
    SummaryRow(AGREEMENT_FLEXIBLE, label="Same answer as k=0 (flex)", digits=3, is_fraction=True),
)
SUMMARY_TREE_ROWS: tuple[SummaryRow, ...] = (  # runs with tree cells; "-" (N/A) in chain columns
    SummaryRow(TREE_SIZE, digits=1),
    SummaryRow(None, label="Tree acceptance per depth (%)", family="depth"),
    SummaryRow(None, label="Tree acceptance per rank (%)", family="rank"),
)
