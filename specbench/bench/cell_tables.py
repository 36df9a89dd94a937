"""All rows one completed cell contributes to the four result tables."""

from __future__ import annotations

from typing import Any

from specbench.bench.cell_runner import CellRun
from specbench.bench.cell_summary import category_rows, cell_row
from specbench.bench.reasoning_split import split_reasoning
from specbench.bench.server_acceptance import server_acceptance
from specbench.bench.speedup_bound import bound_columns
from specbench.bench.store import RunStore
from specbench.metrics.cell_metrics import CellMetrics
from specbench.metrics.goodput import parse_goodput
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runs.cell_key import CellKey
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
        "method": config.engine.method,
        "workload": workload.name,
        "workload_version": workload.version,
        "label": config.label,
    }


def cell_tables(
    run_id: str, run: CellRun, config: SweepConfig, workload: Workload, store: RunStore, run_index: int | None = None
) -> dict[str, list[Row]]:
    """Rows per table; the baseline (k = 0) cell of the same repeat/temperature/concurrency comes from `store`.
    `run_index`: the cell's position in the sweep's run order."""
    keys = key_columns(run_id, run.key, config, workload)
    finished = sorted((split_reasoning(item, config.reasoning_parser) for item in run.finished),
                      key=lambda item: item.request_index)
    slo = parse_goodput(config.goodput)
    requests = [request_row(keys, item, workload, slo) for item in finished]
    metrics = CellMetrics.of([RequestMetrics.from_stats(item.output.stats) for item in finished if item.error is None])
    baseline = run.key.baseline
    is_baseline = baseline == run.key
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
    cell = cell_row(
        keys,
        extra,
        metrics,
        requests,
        baseline.cell_id,
        requests if is_baseline else store.rows("requests", baseline.cell_id),
        store.num_positions,
        backend=run.backend,
        steps=steps,
    )
    if not all(item.has_draft_stats for item in finished):
        cell.update(server_acceptance(run.counters, run.counters_note, store.num_positions))
        cell.update(bound_columns(cell, steps))  # from the server's acceptance
    return {
        "requests": requests,
        "steps": steps,
        "categories": category_rows(keys, requests, store.num_positions),
        "cells": [cell],
    }
