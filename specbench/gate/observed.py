"""What the gate's sweep measured, read back from its run directory: greedy outputs per k, draft counts per request,
GSM8K accuracy, per-repeat speed, and every request that crashed, came back empty or ended abnormally."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.backends.server_info import ServerSpeculation
from specbench.json_file import read_json_object
from specbench.metrics.accuracy import Accuracy
from specbench.runs.tables import read_run_table

NORMAL_FINISH = ("stop", "length")


@dataclass(frozen=True)
class GreedyOutput:
    sample_id: str
    turn: int
    text: str


@dataclass(frozen=True)
class RequestAcceptance:
    """One request's draft counts: the per-request samples behind a per-position acceptance rate."""

    sample_id: str
    turn: int
    num_draft_rounds: int
    num_drafted_per_pos: tuple[int, ...]  # [num_steps] rounds proposing draft position k
    num_accepted_per_pos: tuple[int, ...]  # [num_steps] rounds accepting draft position k


@dataclass(frozen=True)
class SpeedSamples:
    """One value per repeat of the speculative cell (speed noise is run-to-run noise: compare/noise.py)."""

    output_throughput: tuple[float, ...]  # [num_repeats] tok/s
    tpot_median_s: tuple[float, ...]  # [num_repeats] seconds


@dataclass(frozen=True)
class OutputProblem:
    cell_id: str
    sample_id: str
    turn: int
    kind: str  # "failed" | "empty" | "truncated"
    detail: str


@dataclass(frozen=True)
class Observation:
    num_steps: int  # k of the speculative cell
    baseline_outputs: tuple[GreedyOutput, ...] | None  # k = 0 cell of this run (repeat 0); None when not run
    spec_outputs: tuple[GreedyOutput, ...]  # k cell, repeat 0, successful requests, in sample order
    # k cell, repeat 0: per request, or (a server without per-request counts) one pooled sample from its counters;
    # None without either
    acceptance: tuple[RequestAcceptance, ...] | None
    accuracy: Accuracy | None  # k cell, repeat 0; None for a workload without scores
    speed: SpeedSamples
    problems: tuple[OutputProblem, ...]  # every cell and repeat
    num_requests: int  # every cell and repeat, failed ones included
    # an HTTP server's own speculative config as the manifest recorded it (backends/server_info.py); None: not said
    server_speculation: ServerSpeculation | None = None


def read_observation(run_dir: Path, num_steps: int) -> Observation:
    cells = read_run_table(run_dir, "cells")
    requests = read_run_table(run_dir, "requests")
    spec_cells = cells[cells["num_steps"] == num_steps].sort_values("repeat")
    first = requests[requests["repeat"] == 0]
    spec = first[first["num_steps"] == num_steps]
    base = first[first["num_steps"] == 0] if num_steps != 0 else first.iloc[0:0]
    return Observation(
        num_steps=num_steps,
        baseline_outputs=_outputs(base) if len(base) else None,
        spec_outputs=_outputs(spec),
        acceptance=_acceptance(spec) or _counter_acceptance(spec_cells, num_steps),
        accuracy=_accuracy(spec),
        speed=SpeedSamples(_finite(spec_cells["output_throughput"]), _finite(spec_cells["tpot_s_median"])),
        problems=tuple(p for row in requests.to_dict("records") if (p := _problem(row)) is not None),
        num_requests=len(requests),
        server_speculation=_server_speculation(run_dir),
    )


def _server_speculation(run_dir: Path) -> ServerSpeculation | None:
    manifest = read_json_object(run_dir / "manifest.json", "run manifest")
    server = (manifest.get("backend") or {}).get("server") or {}
    told = server.get("speculative") if isinstance(server, dict) else None
    if not isinstance(told, dict):
        return None
    return ServerSpeculation(told.get("method"), told.get("num_steps"), str(told.get("source")))


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["error"].isna()].sort_values(["request_index", "turn"])


def _outputs(frame: pd.DataFrame) -> tuple[GreedyOutput, ...]:
    return tuple(GreedyOutput(str(r["sample_id"]), int(r["turn"]), str(r["output_text"] or ""))
                 for r in _ok(frame).to_dict("records"))


def _acceptance(frame: pd.DataFrame) -> tuple[RequestAcceptance, ...] | None:
    rows = _ok(frame).to_dict("records")
    if not rows or any(_missing(r["num_drafted_per_pos"]) for r in rows):
        return None  # over HTTP without response-body draft counts
    return tuple(RequestAcceptance(str(r["sample_id"]), int(r["turn"]), int(r["num_draft_rounds"]),
                                   tuple(int(v) for v in r["num_drafted_per_pos"]),
                                   tuple(int(v) for v in r["num_accepted_per_pos"])) for r in rows)


def _counter_acceptance(cells: pd.DataFrame, num_steps: int) -> tuple[RequestAcceptance, ...] | None:
    """A server without per-request counts: its /metrics counter deltas over repeat 0's window, as one pooled
    sample. Only when every round drafted k tokens (T_d = k x D), so that each position was proposed D times."""
    row = cells.iloc[0].to_dict() if len(cells) else None
    if row is None or _missing(row.get("server_accepted_per_pos")) or _missing(row.get("num_draft_rounds")):
        return None
    rounds, per_pos = int(row["num_draft_rounds"]), [float(v) for v in row["server_accepted_per_pos"]]
    if rounds == 0 or len(per_pos) != num_steps or int(row["num_draft_tokens"]) != rounds * num_steps:
        return None
    return (RequestAcceptance("(server counters)", 0, rounds, (rounds,) * num_steps,
                              tuple(round(v) for v in per_pos)),)


def _accuracy(frame: pd.DataFrame) -> Accuracy | None:
    from specbench.metrics.accuracy import accuracy
    from specbench.runs.records import score_from_row

    scores = [s for r in _ok(frame).to_dict("records") if (s := score_from_row(r)) is not None]
    return accuracy(scores) if scores else None


def _problem(row: dict[str, Any]) -> OutputProblem | None:
    where = (str(row["cell_id"]), str(row["sample_id"]), int(row["turn"]))
    if not _missing(row["error"]):
        return OutputProblem(*where, "failed", str(row["error"]))
    if not (row["output_text"] or "").strip() and not (row.get("reasoning_text") or "").strip():
        return OutputProblem(*where, "empty", f"finish reason {row['finish_reason']}, "
                                              f"{row['num_output_tokens']} output tokens")
    if row["finish_reason"] not in NORMAL_FINISH:
        return OutputProblem(*where, "truncated", f"finish reason {row['finish_reason']!r}, not stop or length")
    return None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _finite(column: pd.Series) -> tuple[float, ...]:
    return tuple(float(v) for v in column if v is not None and math.isfinite(float(v)))
