"""Cell acceptance columns from a server's counter deltas (HTTP backends), in the engine's column layout."""

from __future__ import annotations

import math
from typing import Any

from specbench.backends.spec_counters import SpecCounters
from specbench.metrics.definitions import ACCEPTANCE_LENGTH_RTOL

ACCEPTANCE_COLUMNS = (
    "num_draft_rounds", "num_draft_tokens", "num_accepted_tokens", "acceptance_rate", "acceptance_length",
    "acceptance_length_per_request", "acceptance_length_from_positions", "is_acceptance_consistent",
)
ENGINE_SOURCE = "engine"


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
    row["acceptance_source"] = f"server:{counters.source}"
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
        acceptance_rate=accepted / drafted if drafted else None,
        acceptance_length=1.0 + accepted / rounds if rounds else 1.0,
    )
    per_pos = counters.num_accepted_per_pos
    row["server_accepted_per_pos"] = list(per_pos) if per_pos else None
    if per_pos:
        rates = [a / rounds for a in per_pos] if rounds else []
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
