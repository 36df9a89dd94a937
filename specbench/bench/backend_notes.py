"""Lines the sweep summary adds about how an HTTP run was measured: acceptance source, failures, token counts."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.records import Row, is_null
from specbench.runs.sweep_config import EMBEDDED

_TOKEN_SOURCES = {
    "server_per_chunk": "exact, from the server's per-chunk usage",
    "retokenized": "the server sent no per-chunk usage: chunk text re-tokenised locally (approximate per chunk)",
    "one_per_chunk": "the server sent no per-chunk usage and no tokenizer was given: one token per chunk, "
                     "the last chunk the rest (approximate per chunk)",
    "mixed": "mixed sources (see requests.parquet token_count_source)",
}


def backend_notes(cells: Sequence[Row]) -> list[str]:
    http = [c for c in cells if c.get("backend", EMBEDDED) != EMBEDDED]
    notes = []
    if http:
        notes.append("HTTP backend: latencies measured on the client (arrival = request sent); acceptance is per "
                     "cell from the server's /metrics counter deltas")
        draft_sources = sorted({c["draft_stats_source"] for c in http if not is_null(c.get("draft_stats_source"))})
        notes.append(f"per-request draft columns from: {', '.join(draft_sources)}" if draft_sources else
                     "per-request draft columns are empty (the server sent no per-request speculative counts)")
        sources = sorted({c["acceptance_source"] for c in http if not is_null(c["acceptance_source"])})
        missing = sorted({c["acceptance_note"] for c in http if is_null(c["acceptance_source"])
                          and not is_null(c["acceptance_note"])})
        if sources:
            notes.append(f"acceptance from: {', '.join(sources)}")
        notes += [f"no acceptance metrics: {note}" for note in missing]
        for source in sorted({c["token_count_source"] for c in http if not is_null(c["token_count_source"])}):
            notes.append(f"tokens per chunk: {_TOKEN_SOURCES.get(source, source)}")
        for c in http:
            generated, received = c["server_generation_tokens"], c["num_output_tokens"]
            if not is_null(generated) and generated > received:
                notes.append(f"{_where(c)}: the server generated {generated} tokens in the window but "
                             f"{received} were received by successful requests: {_gap_cause(c)}")
    for note in sorted({c["drafting_note"] for c in cells if not is_null(c.get("drafting_note"))}):
        notes.append(note)
    for c in cells:
        if c.get("num_errors"):
            notes.append(f"{_where(c)}: {c['num_errors']} failed request(s) left out of the metrics "
                         f"({c['error_summary']})")
        if c.get("num_anomalies"):
            notes.append(f"{_where(c)}: {c['num_anomalies']} anomal{'y' if c['num_anomalies'] == 1 else 'ies'} in "
                         f"the server's reports ({c['anomaly_summary']}; see requests.parquet anomalies)")
            window = c.get("window_anomalies")  # a list, or a numpy array read back from parquet
            notes += [f"{_where(c)}: {anomaly}" for anomaly in (() if window is None else window)]
    return notes


def _gap_cause(cell: Row) -> str:
    """Specbench's own failed requests generated tokens nobody counted; only without them is it other traffic."""
    if cell.get("num_errors"):
        return f"its {cell['num_errors']} failed request(s) (or other traffic) account for the rest"
    return "other traffic is in its counters"


def _where(cell: Row) -> str:
    return f"cell {cell['cell_id']}"
