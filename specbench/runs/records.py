"""Rows of requests.parquet and steps.parquet, and the way back from a request row to its metrics."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specbench.engine.stats import RequestStats, StepStats
from specbench.metrics import definitions
from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.goodput import SloBounds
from specbench.metrics.loops import loop_columns
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runs.finished_turn import ENGINE_COUNTS, FinishedTurn
from specbench.speculation.verify.tree_stats import TreeAcceptanceCounts
from specbench.workloads.base import Score, Workload

Row = dict[str, Any]
SCORE_FIELDS = tuple(f.name for f in dataclasses.fields(Score))


# A request's tree counts (speculation/verify/tree_stats.py), null for chains: the totals, then the per-depth and
# per-rank lists. Per-round acceptance lengths are `accepted_per_round`; per-round tree sizes are not kept (their sum
# is).
TREE_TOTALS = ("tree_num_rounds", "tree_num_accepted", "tree_num_nodes")
TREE_LISTS = ("tree_offered_per_depth", "tree_accepted_per_depth", "tree_offered_per_rank", "tree_accepted_per_rank")
DRAFT_COLUMNS = ("num_draft_rounds", "num_draft_tokens", "num_accepted_tokens", "num_drafted_per_pos",
                 "num_accepted_per_pos", "accepted_per_round", *TREE_TOTALS, *TREE_LISTS)


def tree_columns(tree: TreeAcceptanceCounts | None) -> Row:
    """A request row's tree columns; all null for a request that drafted chains only."""
    if tree is None:
        return dict.fromkeys(TREE_TOTALS + TREE_LISTS)
    return {name: getattr(tree, name.removeprefix("tree_")) for name in TREE_TOTALS} | {
        name: list(getattr(tree, name.removeprefix("tree_"))) for name in TREE_LISTS}


def tree_from_row(row: Mapping[str, Any]) -> TreeAcceptanceCounts | None:
    """The counts back from a row; None where null or absent (chains; rows written before trees)."""
    if is_null(row.get("tree_num_rounds")):
        return None
    lists = {name.removeprefix("tree_"): [int(n) for n in row[name]] for name in TREE_LISTS}
    return TreeAcceptanceCounts(**{name.removeprefix("tree_"): int(row[name]) for name in TREE_TOTALS}, **lists)


def request_row(keys: Mapping[str, Any], item: FinishedTurn, workload: Workload, slo: SloBounds | None = None) -> Row:
    """`slo`: --goodput bounds (None: `is_good` stays null)."""
    turn, out, stats = item.turn, item.output, item.output.stats
    metrics = RequestMetrics.from_stats(stats)
    text = out.text
    score = workload.score(turn.sample, text) if text is not None and item.error is None else None
    row: Row = dict(keys)
    row.update(
        request_id=out.request_id,
        request_index=item.request_index,
        sample_id=turn.sample.sample_id,
        category=turn.sample.category,
        subcategory=turn.sample.subcategory,
        turn=turn.turn_index,
        scheduled_time=turn.scheduled_time,
        arrival_time=stats.arrival_time,
        first_scheduled_time=stats.first_scheduled_time,
        finish_time=stats.finish_time,
        emission_times=list(stats.emission_times),
        tokens_per_emission=list(stats.tokens_per_emission),
        num_prompt_tokens=stats.num_prompt_tokens,
        num_output_tokens=metrics.num_output_tokens,
        num_emissions=metrics.num_emissions,
        finish_reason=out.finish_reason,
        error=item.error,
        anomalies=list(item.anomalies),
        num_anomalies=len(item.anomalies),
        token_count_source=item.token_count_source,
        is_usage_reported=item.is_usage_reported,
        ttft_s=metrics.ttft_s,
        tpot_s=metrics.tpot_s,
        e2e_s=metrics.e2e_s,
        num_draft_rounds=stats.num_draft_rounds,
        num_draft_tokens=stats.num_draft_tokens,
        num_accepted_tokens=stats.num_accepted_tokens,
        num_drafted_per_pos=list(stats.num_drafted_per_pos),
        num_accepted_per_pos=list(stats.num_accepted_per_pos),
        accepted_per_round=list(stats.accepted_per_round),
        num_preemptions=stats.num_preemptions,
        num_cached_prompt_tokens=stats.num_cached_prompt_tokens,
        **tree_columns(stats.tree_counts),
        request_temperature=turn.params.temperature,
        max_tokens=turn.params.max_tokens,
        request_seed=turn.params.seed,
        prompt_sha256=turn.prompt_sha256,
        output_text=text,
        reasoning_text=item.reasoning_text,
        is_good=None if slo is None or not slo.is_set else item.error is None and slo.is_good(metrics),
    )
    row.update({name: getattr(score, name) if score is not None else None for name in SCORE_FIELDS})
    row["draft_stats_source"] = ENGINE_COUNTS if item.has_draft_stats else None
    if not item.has_draft_stats:  # HTTP: only what the server's response body says
        row.update({name: None for name in DRAFT_COLUMNS}, first_scheduled_time=None, num_preemptions=None)
        draft = item.server_draft
        if draft is not None:
            row.update(draft_stats_source=draft.source, num_draft_rounds=draft.num_draft_rounds,
                       num_draft_tokens=draft.num_draft_tokens, num_accepted_tokens=draft.num_accepted_tokens,
                       num_accepted_per_pos=list(draft.num_accepted_per_pos) if draft.num_accepted_per_pos else None)
    row["acceptance_length"] = request_acceptance_length(row)
    row.update(loop_columns(out.output_token_ids, text))
    return row


def step_rows(keys: Mapping[str, Any], steps: Iterable[StepStats], step_offset: int) -> list[Row]:
    """`step_offset`: where this session's engine step 0 lands in the run's global step numbering."""
    return [{**keys, **dataclasses.asdict(step), "step": step.step + step_offset} for step in steps]


def is_null(value: Any) -> bool:
    """None, or pandas' NaN for a missing number."""
    return value is None or (isinstance(value, float) and value != value)


def has_draft_stats(row: Mapping[str, Any]) -> bool:
    """Rounds and accepted tokens are both known (the engine; HTTP only where the server sends both per request).
    False for other HTTP rows: acceptance is per cell, from server counters."""
    return not is_null(row["num_draft_rounds"]) and not is_null(row["num_accepted_tokens"])


def request_acceptance_length(row: Mapping[str, Any]) -> float | None:
    """1 + A_i / D_i; None without draft rounds or per-request counts."""
    if not has_draft_stats(row) or not row["num_draft_rounds"]:
        return None
    return definitions.acceptance_length(row["num_accepted_tokens"], row["num_draft_rounds"])


def is_success(row: Mapping[str, Any]) -> bool:
    return is_null(row.get("error"))


def stats_from_row(row: Mapping[str, Any]) -> RequestStats:
    """The engine's raw per-request record, rebuilt from a requests.parquet row (dict or pandas Series).

    Null draft and preemption columns (HTTP rows) read as zero: use `has_draft_stats` to tell them apart.
    """

    def count(name: str) -> int:
        return 0 if is_null(row[name]) else int(row[name])

    def counts(name: str) -> list[int]:
        return [] if row[name] is None else [int(n) for n in row[name]]

    first = row["first_scheduled_time"]
    return RequestStats(
        arrival_time=float(row["arrival_time"]),
        num_prompt_tokens=count("num_prompt_tokens"),
        first_scheduled_time=None if is_null(first) else float(first),
        emission_times=[float(t) for t in row["emission_times"]],
        tokens_per_emission=[int(n) for n in row["tokens_per_emission"]],
        num_draft_rounds=count("num_draft_rounds"),
        num_draft_tokens=count("num_draft_tokens"),
        num_accepted_tokens=count("num_accepted_tokens"),
        num_drafted_per_pos=counts("num_drafted_per_pos"),
        num_accepted_per_pos=counts("num_accepted_per_pos"),
        accepted_per_round=counts("accepted_per_round"),
        num_preemptions=count("num_preemptions"),
        tree_counts=tree_from_row(row),
    )


def cell_metrics_from_rows(rows: Sequence[Mapping[str, Any]]) -> CellMetrics:
    """Recompute a cell's metrics from its requests.parquet rows (what cells.parquet holds): failed requests are
    left out; over HTTP the acceptance part is empty (cells.parquet takes it from the server's counters)."""
    return CellMetrics.of([RequestMetrics.from_stats(stats_from_row(row)) for row in rows if is_success(row)])


def score_from_row(row: Mapping[str, Any]) -> Score | None:
    if row.get("gold_answer") is None:
        return None
    return Score(**{name: row[name] for name in SCORE_FIELDS})
