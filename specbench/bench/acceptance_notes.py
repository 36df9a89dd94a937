"""The summary's acceptance definitions side by side, per speculative grid point (means over repeats): token-weighted
(pooled: 1 + A / D over every round), request-weighted (mean over requests of 1 + A_i / D_i), the rate A / T_d, and
the conditional rate per position (A_k / A_(k-1)). Tools print different ones under one name, and pooled vs mean
of per-request rates can flip a comparison (vLLM #42508): a WARNING when the two lengths differ by more than
DEFINITIONS_RTOL, so a number is compared only with one of its own kind. Where rounds drafted fewer than k tokens (a
drafter that finds nothing to draft, a server with adaptive k), the rounds by drafted length; where the sweep ran
several k, a WARNING that their rates are not comparable (a longer draft lowers A / T_d at equal drafting quality)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.runs.records import Row, is_null

DEFINITIONS_RTOL = 0.05


def _mean(rows: Sequence[Row], column: str) -> float | None:
    values = [float(r[column]) for r in rows if not is_null(r.get(column))]
    return sum(values) / len(values) if values else None


def acceptance_definition_lines(cells: Sequence[Row]) -> list[str]:
    points: dict[tuple, list[Row]] = {}
    for row in cells:
        if row["num_steps"] and not is_null(row.get("acceptance_length")):
            temperature = "default" if math.isnan(row["temperature"]) else format(row["temperature"], "g")
            points.setdefault((temperature, row["concurrency"], row["num_steps"]), []).append(row)
    lines, apart = [], []
    for (temperature, concurrency, k), rows in points.items():
        pooled, per_request = _mean(rows, "acceptance_length"), _mean(rows, "acceptance_length_per_request")
        rate = _mean(rows, "acceptance_rate")
        conditional = [_mean(rows, f"cond_accept_rate_pos_{i}") for i in range(1, k + 1)]
        parts = [f"AL pooled {pooled:.3f}"]
        if per_request is not None:
            parts.append(f"per-request mean {per_request:.3f}")
            if abs(per_request / pooled - 1) > DEFINITIONS_RTOL:
                apart.append(f"t={temperature} c={concurrency} k={k} pooled {pooled:.3f} vs per-request "
                             f"{per_request:.3f}")
        if rate is not None:
            parts.append(f"rate A/T_d {rate:.1%}")
        if any(c is not None for c in conditional):
            parts.append("conditional per position " + " ".join("-" if c is None else f"{c:.0%}"
                                                                for c in conditional))
        lengths = _drafted_lengths(rows, k)
        if lengths is not None:
            parts.append(lengths)
        lines.append(f"  t={temperature} c={concurrency} k={k}: " + ", ".join(parts))
    if not lines:
        return []
    warn = [f"WARNING: pooled and per-request acceptance lengths differ by > {DEFINITIONS_RTOL:.0%} "
            f"({'; '.join(apart[:4])}): compare each only with its own kind (long requests weigh more in the "
            "pooled one)"] if apart else []
    ks = sorted({k for _, _, k in points})
    if len(ks) > 1:
        warn.append(f"WARNING: acceptance rates of k = {', '.join(map(str, ks))} are not comparable across k (a "
                    "longer draft lowers A / T_d at equal drafting quality): compare per position, or speedup")
    return warn + ["acceptance, by definition (pooled = token-weighted, per-request = request-weighted; rates of "
                   "different k are not comparable)"] + lines


def _drafted_lengths(rows: Sequence[Row], k: int) -> str | None:
    """'rounds by drafted length 1: 12%, 2: 5%, 3: 83%' over the repeats, where some round drafted fewer than k
    tokens (cells.num_rounds_by_drafted_length); None where every round drafted k, or nothing says."""
    counts = [list(r["num_rounds_by_drafted_length"]) for r in rows
              if not is_null(r.get("num_rounds_by_drafted_length"))]
    if not counts:
        return None
    totals = [sum(c[i] for c in counts if i < len(c)) for i in range(k)]
    num_rounds = sum(totals)
    if num_rounds == 0 or totals[-1] == num_rounds:
        return None
    return "rounds by drafted length " + ", ".join(f"{n}: {t / num_rounds:.0%}" for n, t in enumerate(totals, 1))
