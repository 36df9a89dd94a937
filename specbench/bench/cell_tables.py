"""All rows one completed cell contributes to the four result tables."""

from __future__ import annotations

from typing import Any

from specbench.backends.anomalies import cell_counter_anomalies
from specbench.bench.cell_runner import CellRun
from specbench.bench.cell_summary import category_rows, cell_row
from specbench.bench.reasoning_split import split_reasoning
from specbench.bench.server_acceptance import (
    LAUNCHED_K0_DRAFTS,
    drafting_label,
    response_acceptance,
    server_acceptance,
)
from specbench.bench.speedup_bound import bound_columns
from specbench.bench.store import RunStore
from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.goodput import parse_goodput
from specbench.metrics.recompute import consistency_columns
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runs.cell_key import CellKey
from specbench.runs.drafting import did_draft, is_baseline_cell
from specbench.runs.records import Row, request_row, step_rows
from specbench.runs.sweep_config import SweepConfig
from specbench.workloads.base import Workload


def key_columns(run_id: str, key: CellKey, config: SweepConfig, workload: Workload) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "cell_id": key.cell_id,
        "repeat": key.repeat,
        "concurrency": key.concurrency,
        "temperature": key.temperature_value,
        "num_steps": key.num_steps,
        "eagle_topk": key.eagle_topk,
        "draft_token_budget": key.draft_token_budget,
        "method": config.engine.method,
        "workload": workload.name,
        "workload_version": workload.version,
        "label": config.label,
    }


def cell_tables(
    run_id: str, run: CellRun, config: SweepConfig, workload: Workload, store: RunStore, run_index: int | None = None
) -> dict[str, list[Row]]:
    """Rows per table; the baseline (k = 0) cell of the same repeat/temperature/concurrency comes from `store`,
    and is one only if it did not draft (runs/drafting.py). A k = 0 cell that drafted (a server speculating on its
    own) is labelled with the server's method and k where it tells (server_acceptance.drafting_label).
    `run_index`: the cell's position in the sweep's run order."""
    keys = key_columns(run_id, run.key, config, workload)
    finished = sorted((split_reasoning(item, config.reasoning_parser) for item in run.finished),
                      key=lambda item: item.request_index)
    slo = parse_goodput(config.goodput)
    requests = [request_row(keys, item, workload, slo) for item in finished]
    metrics = CellMetrics.of([RequestMetrics.from_stats(item.output.stats) for item in finished if item.error is None])
    acceptance = None
    if not all(item.has_draft_stats for item in finished):  # HTTP: from response bodies, else /metrics deltas
        acceptance = (response_acceptance(requests, store.num_positions)
                      or server_acceptance(run.counters, run.counters_note, store.num_positions))
    drafted = did_draft(acceptance if acceptance is not None else metrics.to_row(store.num_positions))
    baseline = run.key.baseline
    if baseline == run.key:
        baseline_rows = None if drafted else requests  # a drafting k = 0 cell is compared with nothing
    else:
        stored = store.rows("cells", baseline.cell_id)
        baseline_rows = store.rows("requests", baseline.cell_id) if stored and is_baseline_cell(stored[0]) else None
    note = None
    if drafted and run.key.num_steps == 0 and config.has_num_steps_control:
        note = LAUNCHED_K0_DRAFTS  # the grid set this server's k: kept (relabelling would collide with k > 0)
    elif drafted and run.key.num_steps == 0:
        per_pos = (acceptance or {}).get("server_accepted_per_pos")
        label = drafting_label(config.engine.method, run.server_speculation, per_pos)
        note = label.note
        keys.update(method=label.method, num_steps=label.num_steps)
        for row in requests:
            row.update(method=label.method, num_steps=label.num_steps)
    extra = {
        "request_rate": config.request_rate,
        "burstiness": config.burstiness,
        "duration_limit_s": config.duration,
        "ramp_up_strategy": config.ramp_up_strategy,
        "ramp_up_start_rps": config.ramp_up_start_rps,
        "ramp_up_end_rps": config.ramp_up_end_rps,
        "num_warmup": config.num_warmup(run.key.concurrency),
        "is_cache_reset": run.cache_reset.is_reset,
        "cache_reset_note": run.cache_reset.note,
        "goodput_slo": slo.describe(),
        "start_unix_s": run.start_unix_s,
        "wall_s": run.wall_s,
        "run_index": run_index,
    }
    steps = step_rows(keys, run.steps, store.step_offset)
    cell = cell_row(keys, extra, metrics, requests, baseline.cell_id, baseline_rows, store.num_positions,
                    backend=run.backend,
                    window_anomalies=run.window_anomalies + cell_counter_anomalies(run.counters, finished),
                    steps=steps)
    if acceptance is not None:
        cell.update(acceptance)
        cell.update(bound_columns(cell, steps))  # from the server's acceptance
    if note is not None:
        cell["drafting_note"] = note
    cell.update(prefix_cache_hit_rate=run.prefix_cache.hit_rate, prefix_cache_source=run.prefix_cache.source,
                prefix_cache_note=run.prefix_cache.note)
    # Last, on the complete row: a second implementation from the raw records checks what it says.
    cell.update(consistency_columns(cell, requests, store.num_positions, steps))
    return {
        "requests": requests,
        "steps": steps,
        "categories": category_rows(keys, requests, store.num_positions),
        "cells": [cell],
    }
