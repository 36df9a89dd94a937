"""Cell acceptance columns from a server's counter deltas (HTTP backends), in the engine's column layout."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specbench.backends.server_info import ServerSpeculation
from specbench.backends.spec_counters import SpecCounters
from specbench.metrics import definitions
from specbench.metrics.definitions import ACCEPTANCE_LENGTH_RTOL
from specbench.runs.drafting import UNKNOWN_METHOD
from specbench.runs.records import Row, cell_metrics_from_rows, has_draft_stats, is_success

ACCEPTANCE_COLUMNS = (
    "num_draft_rounds", "num_draft_tokens", "num_accepted_tokens", "acceptance_rate", "acceptance_length",
    "acceptance_length_per_request", "acceptance_length_from_positions", "is_acceptance_consistent",
)
# acceptance_source: where a cell's acceptance columns come from. Per request (so per category, and bootstrapped
# in compare): the engine's stats, or counts in the server's response bodies. Per cell only: "server:<family>",
# the server's /metrics (Prometheus) counter deltas over the measured window.
ENGINE_SOURCE = "engine"
RESPONSE_SOURCE = "response"
PROMETHEUS_PREFIX = "server:"


def empty_acceptance(num_positions: int) -> dict[str, Any]:
    """Every acceptance column null (per-position ones included)."""
    row: dict[str, Any] = dict.fromkeys(ACCEPTANCE_COLUMNS)
    for k in range(1, num_positions + 1):
        row[f"accept_rate_pos_{k}"] = row[f"cond_accept_rate_pos_{k}"] = None
    return row


def server_acceptance(counters: SpecCounters | None, note: str | None, num_positions: int) -> dict[str, Any]:
    """Acceptance columns, acceptance_source/_note and server_generation_tokens of one cell's window.

    vLLM-style counters give D, T_d, A and A_k exactly as the engine defines them (metrics/definitions.py);
    SGLang's give only verify rounds, so AL = generation tokens / verify rounds (approximate, said in the note).
    """
    row = empty_acceptance(num_positions)
    row.update(acceptance_source=None, acceptance_note=note, server_generation_tokens=None,
               server_accepted_per_pos=None)
    if counters is None:
        return row
    row["acceptance_source"] = f"{PROMETHEUS_PREFIX}{counters.source}"
    rounds = counters.num_drafts
    generated = counters.num_generation_tokens
    row["server_generation_tokens"] = None if generated is None else round(generated)
    row["num_draft_rounds"] = round(rounds)
    if counters.num_accepted_tokens is None:
        if generated is not None and rounds > 0:
            row["acceptance_length"] = generated / rounds
        row["acceptance_note"] = "approximate: the server exports only verify rounds (AL = generated tokens / rounds)"
        return row
    accepted = counters.num_accepted_tokens
    drafted = counters.num_draft_tokens
    row.update(
        num_draft_tokens=None if drafted is None else round(drafted),
        num_accepted_tokens=round(accepted),
        acceptance_rate=definitions.acceptance_rate(accepted, drafted) if drafted else None,
        acceptance_length=definitions.acceptance_length(accepted, rounds) if rounds else 1.0,
    )
    per_pos = counters.num_accepted_per_pos
    row["server_accepted_per_pos"] = list(per_pos) if per_pos else None
    if per_pos:
        rates = [definitions.position_acceptance_rate(a, rounds) for a in per_pos] if rounds else []
        from_positions = 1.0 + sum(rates)
        row["acceptance_length_from_positions"] = from_positions
        row["is_acceptance_consistent"] = math.isclose(
            row["acceptance_length"], from_positions, rel_tol=ACCEPTANCE_LENGTH_RTOL
        )
        previous = (rounds, *per_pos[:-1])
        for k in range(min(len(rates), num_positions)):
            row[f"accept_rate_pos_{k + 1}"] = rates[k]
            row[f"cond_accept_rate_pos_{k + 1}"] = per_pos[k] / previous[k] if previous[k] else None
        if len(per_pos) > num_positions:
            row["acceptance_note"] = (
                f"the server reports {len(per_pos)} draft positions, more than the {num_positions} per-position "
                "columns: every position is in server_accepted_per_pos (AL and rates are exact)"
            )
    return row


def response_acceptance(request_rows: Sequence[Row], num_positions: int) -> dict[str, Any] | None:
    """Acceptance columns pooled from per-request counts the server sent in its response bodies; None unless
    every successful request has them (rounds and accepted tokens)."""
    ok = [r for r in request_rows if is_success(r)]
    if not ok or not all(has_draft_stats(r) for r in ok):
        return None
    row = {name: value for name, value in cell_metrics_from_rows(ok).to_row(num_positions).items()
           if name in ACCEPTANCE_COLUMNS or name.startswith(("accept_rate_pos_", "cond_accept_rate_pos_"))}
    return {**row, "acceptance_source": RESPONSE_SOURCE, "acceptance_note": None, "server_accepted_per_pos": None}


NO_BASELINE = "it is no baseline, so no speedup or agreement vs k=0 is computed for it"
LAUNCHED_K0_DRAFTS = f"warning: the k=0 server drafts (its speculative counters moved); {NO_BASELINE}"


@dataclass(frozen=True)
class DraftingLabel:
    """What a k = 0 cell that drafted (a server speculating on its own) is labelled with."""

    method: str  # the configured method, else the server's, else "unknown"
    num_steps: int  # the server's k, else the number of draft positions its counters report, else 0 (unknown)
    note: str  # for the summary and cells.parquet `drafting_note`


def drafting_label(configured_method: str, speculation: ServerSpeculation | None,
                   accepted_per_pos: Sequence[float] | None) -> DraftingLabel:
    method, method_from = configured_method, "--method"
    if configured_method == "none":
        told = speculation.method if speculation is not None else None
        method, method_from = (told, speculation.source) if told else (UNKNOWN_METHOD, None)
    k, k_from = 0, None
    if speculation is not None and speculation.num_steps:
        k, k_from = speculation.num_steps, speculation.source
    elif accepted_per_pos:
        k, k_from = len(accepted_per_pos), "/metrics position labels"
    said_method = f"method: {method}" + (f" (from {method_from})" if method_from else " (server drafts)")
    said_k = f"k: {k} (from {k_from})" if k_from else "k: unknown"
    note = (f"warning: the server drafts (its speculative counters moved) in a cell the sweep labelled k=0: "
            f"{said_method}, {said_k}; {NO_BASELINE}")
    return DraftingLabel(method, k, note)
