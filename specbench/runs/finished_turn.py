"""A turn once a backend has answered it: what every backend returns and every results table is built from."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.engine.outputs import RequestOutput
from specbench.runs.request_draft import RequestDraft
from specbench.runs.turns import Turn

# How a request's output tokens were counted (requests.parquet `token_count_source`).
ENGINE_COUNTS = "engine"  # the embedded engine's own emissions


@dataclass(frozen=True, slots=True)
class FinishedTurn:
    turn: Turn
    output: RequestOutput  # HTTP backends: what arrived before a failure too (text may be partial)
    request_index: int  # submission order within the run
    error: str | None = None  # why the request failed (HTTP backends); None = success
    token_count_source: str = ENGINE_COUNTS  # see backends/token_counts.py for the HTTP sources
    is_usage_reported: bool | None = None  # HTTP: the server sent a usage block; None for the embedded engine
    has_draft_stats: bool = True  # False over HTTP: acceptance comes from server counters per cell
    reasoning_text: str | None = None  # HTTP: streamed reasoning (output.text is the answer); None when none came
    server_draft: RequestDraft | None = None  # HTTP: the per-request counts the server sent in its response body
    anomalies: tuple[str, ...] = ()  # HTTP: "kind: detail" of each sanity check its report failed (anomalies.py)
