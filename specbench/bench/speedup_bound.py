"""The most speedup over k = 0 that a cell's acceptance allows, and the flag for a speedup above it.

Derivation. Plain decoding emits one token per request per step of time t_decode; speculative decoding emits on
average L tokens per request per verify round of time t_verify, so

    speedup = (L / t_verify) / (1 / t_decode) = L * t_decode / t_verify.

L <= acceptance_length (= 1 + A / D over rounds with drafts; rounds without drafts emit one token; a cell with no
draft round uses its tokens per emission, which is L for the embedded engine). Under the same
load a verify round is a plain step plus drafting, with a target forward over k + 1 tokens per request instead
of one, so t_verify >= t_decode + t_draft >= t_decode. Hence

    speedup <= acceptance_length * (1 - t_draft / t_verify) <= acceptance_length.

When the engine reports step timings (steps.parquet of the embedded engine) the cell's own decode steps give
t_draft / t_verify, measured under the cell's own load, for the tighter bound; otherwise the bound is the
acceptance length. Prefill and queueing only lower the measured speedup. A speedup above the bound by more than
SPEEDUP_BOUND_TOLERANCE is not a property of the method: the baseline ran under different load (drift) or a
measurement is broken.
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.records import Row

# Relative slack above the bound before a speedup is called implausible: two cells' throughputs each carry a
# few percent of run-to-run noise, and batch occupancy differs slightly between the cells.
SPEEDUP_BOUND_TOLERANCE = 0.15


def speedup_bound(acceptance_length: float | None, draft_share: float | None = None) -> float | None:
    """acceptance_length * (1 - draft_share); draft_share = drafting time / verify-round time (None: 0)."""
    if acceptance_length is None or acceptance_length != acceptance_length:  # null or NaN
        return None
    share = 0.0 if draft_share is None else min(max(draft_share, 0.0), 1.0)
    return acceptance_length * (1.0 - share)


def is_speedup_implausible(speedup: float | None, bound: float | None) -> bool | None:
    """Null when either is unknown."""
    if speedup is None or bound is None or speedup != speedup:
        return None
    return speedup > bound * (1.0 + SPEEDUP_BOUND_TOLERANCE)


def draft_share(steps: Sequence[Row]) -> float | None:
    """Drafting time / step time summed over the cell's decode steps; None without timed decode steps."""
    decode = [s for s in steps if s["phase"] == "decode" and s["step_ms"] and s["draft_ms"] is not None]
    total = sum(s["step_ms"] for s in decode)
    return sum(s["draft_ms"] for s in decode) / total if total > 0 else None


def bound_columns(cell: Row, steps: Sequence[Row]) -> Row:
    """speedup_bound and is_speedup_implausible of a written cell row; null for k = 0 and without acceptance."""
    if cell["num_steps"] == 0 or cell["speedup"] is None:
        return {"speedup_bound": None, "is_speedup_implausible": None}
    tokens_per_round = cell["acceptance_length"]
    if tokens_per_round is None and cell["backend"] == "embedded":  # no draft rounds: every round emitted one
        tokens_per_round = cell["tokens_per_emission"]
    bound = speedup_bound(tokens_per_round, draft_share(steps))
    return {"speedup_bound": bound, "is_speedup_implausible": is_speedup_implausible(cell["speedup"], bound)}
