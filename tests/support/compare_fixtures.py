"""Synthetic sweep run directories (the documented schema, written by the bench's own row builders) with
known speed, noise, acceptance and accuracy, for the compare/plot tests."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from specbench.bench.cell_summary import category_rows, cell_row
from specbench.bench.store import to_table
from specbench.metrics.goodput import parse_goodput
from specbench.metrics.loops import loop_columns
from specbench.metrics.request_metrics import RequestMetrics
from specbench.runs.records import (
    cell_metrics_from_rows,
    request_acceptance_length,
    stats_from_row,
    tree_columns,
)
from specbench.runs.schema import SCHEMA_VERSION


@dataclass
class RunSpec:
    label: str
    speed: float = 1.0  # every duration divided by this
    baseline_speed: float | None = None  # the k = 0 cells' speed instead (None: `speed`): a change to speculation
    drift: float | None = None  # baseline_drift of every probed group (None: not probed)
    noise: float = 0.03  # lognormal sigma of each request's pace
    repeat_noise: float = 0.0  # lognormal sigma of a whole repeat's pace
    timing_seed: int = 0
    accept_prob: float = 0.6  # P(accept draft position j | accepted j - 1)
    acceptance_seed: int = 0
    is_correct: Callable[[int], bool] = lambda i: i % 10 < 8
    answer_seed: int = 0  # wrong answers differ between runs with different seeds
    is_lossless: bool = True  # a wrong answer is the same at every k (False: it depends on k: outputs differ)
    concurrencies: Sequence[int] = (1, 4)
    temperatures: Sequence[float] = (0.0,)
    num_steps: Sequence[int] = (0, 2)
    num_requests: int = 40
    repeats: int = 1
    output_len: int = 24
    workload: str = "gsm8k"
    method: str = "draft"
    manifest: dict = field(default_factory=dict)  # overrides merged into the manifest
    goodput: str | None = None  # --goodput bounds, e.g. "tpot:12" (requests get is_good, cells goodput columns)


def _rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("|".join(map(str, parts)).encode()))


def _rounds(spec: RunSpec, num_steps: int, rng: np.random.Generator) -> list[int]:
    """Accepted drafts per verify round until output_len tokens (the prefill emits the first token)."""
    accepted, emitted = [], 1
    while emitted < spec.output_len:
        a = 0
        while a < num_steps and rng.random() < spec.accept_prob:
            a += 1
        accepted.append(a)
        emitted += a + 1
    return accepted


def _requests(spec: RunSpec, keys: dict, cell: str) -> list[dict]:
    k, c, repeat = keys["num_steps"], keys["concurrency"], keys["repeat"]
    timing = _rng(spec.timing_seed, cell)
    pace = float(np.exp(_rng(spec.timing_seed, "repeat", repeat).normal(0, spec.repeat_noise)))
    speed = spec.baseline_speed if k == 0 and spec.baseline_speed is not None else spec.speed
    step_s = 0.01 * (1 + 0.25 * k) * (1 + 0.1 * c) * pace / speed
    slots = [0.0] * c
    rows = []
    for i in range(spec.num_requests):
        slot = int(np.argmin(slots))
        arrival = slots[slot]
        factor = float(np.exp(timing.normal(0, spec.noise)))
        accepted = _rounds(spec, k, _rng(spec.acceptance_seed, keys["temperature"], k, repeat, i)) if k else []
        tokens = [1] + ([a + 1 for a in accepted] if k else [1] * (spec.output_len - 1))
        tokens[-1] -= sum(tokens) - spec.output_len
        gaps = step_s * factor * np.exp(timing.normal(0, spec.noise, len(tokens)))
        gaps[0] = 0.02 * factor / speed
        times = list(arrival + np.cumsum(gaps))
        slots[slot] = times[-1]
        correct = spec.is_correct(i)
        wrong = str(7 + _rng(spec.answer_seed, i, 0 if spec.is_lossless else k).integers(1, 50))
        answer = "42" if correct else wrong
        rows.append({
            **keys, "request_id": f"{cell}/{i}", "request_index": i, "sample_id": str(i),
            "category": "math" if i % 2 else "logic", "subcategory": None, "turn": 0, "scheduled_time": None,
            "arrival_time": arrival, "first_scheduled_time": arrival, "finish_time": times[-1],
            "emission_times": times, "tokens_per_emission": tokens, "num_prompt_tokens": 100,
            "num_output_tokens": spec.output_len, "num_emissions": len(tokens), "finish_reason": "length",
            "error": None, "anomalies": [], "num_anomalies": 0, "token_count_source": "engine", "is_usage_reported": None, "draft_stats_source": "engine",
            "ttft_s": times[0] - arrival, "tpot_s": (times[-1] - times[0]) / (spec.output_len - 1),
            "e2e_s": times[-1] - arrival, "num_draft_rounds": len(accepted), "num_draft_tokens": k * len(accepted),
            "num_accepted_tokens": sum(accepted), "num_drafted_per_pos": [len(accepted)] * k,
            "num_accepted_per_pos": [sum(a > j for a in accepted) for j in range(k)],
            "accepted_per_round": accepted, "num_preemptions": 0, "num_cached_prompt_tokens": None, "request_temperature": keys["temperature"],
            **tree_columns(None),
            "max_tokens": spec.output_len, "request_seed": i, "prompt_sha256": f"{i:064x}",
            "output_text": f"The answer is {answer}.", "reasoning_text": None, "is_good": None,
            **_score(spec, correct, answer),
        })
        rows[-1]["acceptance_length"] = request_acceptance_length(rows[-1])
        rows[-1].update(loop_columns((), rows[-1]["output_text"]))
    if spec.goodput is not None:
        slo = parse_goodput([spec.goodput])
        for row in rows:
            row["is_good"] = slo.is_good(RequestMetrics.from_stats(stats_from_row(row)))
    return rows


def _score(spec: RunSpec, correct: bool, answer: str) -> dict:
    names = ("gold_answer", "strict_answer", "flexible_answer", "strict_normalized", "flexible_normalized")
    if spec.workload != "gsm8k":
        return {**dict.fromkeys(names), "is_strict_match": None, "is_flexible_match": None}
    return {"gold_answer": "42", "strict_answer": answer, "flexible_answer": answer, "strict_normalized": answer,
            "flexible_normalized": answer, "is_strict_match": correct, "is_flexible_match": correct}


def write_run(results_dir: Path, run_id: str, spec: RunSpec) -> Path:
    run_dir = Path(results_dir) / run_id
    run_dir.mkdir(parents=True)
    num_positions = max(spec.num_steps)
    tables: dict[str, list[dict]] = {"cells": [], "requests": [], "steps": [], "categories": []}
    for repeat in range(spec.repeats):
        for temperature in spec.temperatures:
            for c in spec.concurrencies:
                baseline_rows = None
                for k in sorted(spec.num_steps):
                    cell = f"r{repeat}-t{temperature:g}-c{c}-k{k}"
                    keys = {"run_id": run_id, "cell_id": cell, "repeat": repeat, "concurrency": c,
                            "temperature": temperature, "num_steps": k, "eagle_topk": 1,
                            "draft_token_budget": None, "method": spec.method,
                            "workload": spec.workload, "workload_version": "1", "label": spec.label}
                    rows = _requests(spec, keys, cell)
                    baseline_rows = rows if k == 0 else baseline_rows
                    extra = {"request_rate": float("inf"), "burstiness": 1.0, "duration_limit_s": None,
                             "ramp_up_strategy": None, "ramp_up_start_rps": None, "ramp_up_end_rps": None,
                             "num_warmup": 0, "is_cache_reset": False, "cache_reset_note": "synthetic",
                             "goodput_slo": spec.goodput and parse_goodput([spec.goodput]).describe(),
                             "start_unix_s": 0.0, "wall_s": 1.0}
                    tables["cells"].append(cell_row(keys, extra, cell_metrics_from_rows(rows), rows,
                                                    f"r{repeat}-t{temperature:g}-c{c}-k0", baseline_rows,
                                                    num_positions))
                    if spec.drift is not None:
                        tables["cells"][-1]["baseline_drift"] = spec.drift
                    tables["requests"] += rows
                    tables["categories"] += category_rows(keys, rows, num_positions)
    for name, rows in tables.items():
        pq.write_table(to_table(name, rows, num_positions), run_dir / f"{name}.parquet")
    manifest = {
        "schema_version": SCHEMA_VERSION, "run_id": run_id, "label": spec.label,
        "specbench": {"version": "0.1.0", "git": {"sha": "0" * 40, "dirty": False}},
        "versions": {"torch": "2.13.0"}, "device": {"type": "cpu", "name": "test-cpu", "dtype": "float32"},
        "models": {"target": {"path": "/models/tiny", "weights_sha256": "ab" * 32}, "draft_source": "/models/d"},
        "method": spec.method, "proposer": {"method": spec.method},
        "workload": {"name": spec.workload, "version": "1", "data_sha256": "cd" * 32,
                     "num_samples": spec.num_requests},
        "config": {"workload": spec.workload, "limit": spec.num_requests, "shots": None, "seed": 0},
        "sampling": {"max_tokens": 256, "ignore_eos": False, "top_p": 1.0, "top_k": -1, "chat_template": False},
    }
    for key, value in spec.manifest.items():
        manifest[key] = {**manifest[key], **value} if isinstance(value, dict) else value
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return run_dir


def plot_fixture_runs(tmp_path: Path, repeats: int) -> list:
    """Two loaded runs (one flagged speedup in the second), k in {0, 2, 4}, concurrency 1 and 4: every plot kind
    (tests/compare/test_plot_readability.py; scripts/plot_samples.py draws docs/plots/ from them)."""
    specs = [RunSpec("before", repeats=repeats, repeat_noise=0.3, num_requests=6, num_steps=(0, 2, 4),
                     concurrencies=(1, 4)),
             RunSpec("after-with-a-rather-long-label", speed=1.3, repeats=repeats, repeat_noise=0.3, num_requests=6,
                     num_steps=(0, 2, 4), concurrencies=(1, 4), accept_prob=0.8, answer_seed=1,
                     is_correct=lambda i: i % 10 < 1)]
    from specbench.compare.loading import load_run  # compare's reader: only the plot tests need it

    runs = [load_run(write_run(tmp_path, f"r{repeats}-{s.label}", s)) for s in specs]
    cells = runs[1].cells
    flagged = (cells["num_steps"] == 4) & (cells["concurrency"] == 4)
    cells["is_speedup_implausible"] = flagged.astype(object).where(flagged, None)
    return runs
