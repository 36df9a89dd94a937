"""A second, independent computation of a cell's acceptance and latency metrics from its raw request rows.

Written from definitions.py alone (no code shared with cell_metrics.py / request_metrics.py / acceptance.py), so an
accounting bug in either shows up as a disagreement: `consistency_columns` compares the cell row with this
recomputation and checks the raw records' invariants (sum_k A_k = A, A_k non-increasing, A <= T_d, ...).
NOTE: independent on purpose: it writes its formulas out again (1 + A / D, A / T_d, ...) instead of calling
definitions.py's, which every other consumer calls; a wrong formula there then disagrees with this one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

COUNT_RTOL = 1e-9  # values derived from integer counts
TIME_RTOL = 1e-6  # means of perf_counter differences
TIME_ATOL = 1e-12  # seconds: a mean of zero gaps
PER_REQUEST_SOURCES = ("engine", "response")  # acceptance_source values computed from the request rows


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _ints(value: Any) -> list[int] | None:
    """A list column (list, or numpy array read back from parquet) as ints; None when null."""
    return None if value is None else [int(v) for v in value]


@dataclass(frozen=True, slots=True)
class Recomputed:
    values: dict[str, tuple[float | None, float]]  # cell column -> (recomputed value, relative tolerance)
    violations: tuple[str, ...]  # invariants the raw records break


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def recompute(request_rows: Sequence[Mapping[str, Any]], num_positions: int, *, with_acceptance: bool = True,
              step_rows: Sequence[Mapping[str, Any]] = ()) -> Recomputed:
    """Metrics of the successful rows (`error` null); acceptance only when `with_acceptance` and every such row
    carries rounds and accepted counts (per position / proposed tokens only where all carry them too)."""
    ok = [r for r in request_rows if _missing(r.get("error"))]
    violations: list[str] = []
    ttfts, tpots, gaps = [], [], []
    num_tokens = num_emissions = 0
    for r in ok:
        where = f"request {r.get('request_index')}"
        times = [float(t) for t in r["emission_times"]]
        sizes = _ints(r["tokens_per_emission"]) or []
        if len(times) != len(sizes):
            violations.append(f"{where}: {len(times)} emission times vs {len(sizes)} token counts")
        num_output = int(r["num_output_tokens"])
        if sum(sizes) != num_output:
            violations.append(f"{where}: tokens per emission sum {sum(sizes)} != output tokens {num_output}")
        if any(b < a for a, b in zip(times, times[1:])):
            violations.append(f"{where}: emission times decrease")
        num_tokens += sum(sizes)
        num_emissions += len(sizes)
        if not times:
            continue
        ttft = times[0] - float(r["arrival_time"])
        if ttft < 0:
            violations.append(f"{where}: TTFT {ttft:.3g} s < 0")
        ttfts.append(ttft)
        if sum(sizes) >= 2:
            tpots.append((times[-1] - times[0]) / (sum(sizes) - 1))
        gaps += [b - a for a, b in zip(times, times[1:])]
    values: dict[str, tuple[float | None, float]] = {
        "tokens_per_emission": (num_tokens / num_emissions if num_emissions else None, COUNT_RTOL),
        "ttft_s_mean": (_mean(ttfts), TIME_RTOL),
        "tpot_s_mean": (_mean(tpots), TIME_RTOL),
        "itl_s_mean": (_mean(gaps), TIME_RTOL),
    }
    for s in step_rows:
        if not _missing(s.get("num_draft_tokens")) and int(s["num_accepted_tokens"]) > int(s["num_draft_tokens"]):
            violations.append(f"step {s.get('step')}: accepted {s['num_accepted_tokens']} > drafted "
                              f"{s['num_draft_tokens']}")
    if with_acceptance and ok and all(not _missing(r["num_draft_rounds"]) and not _missing(r["num_accepted_tokens"])
                                      for r in ok):
        values.update(_acceptance(ok, num_positions, violations))
    return Recomputed(values, tuple(violations))


def _acceptance(ok: Sequence[Mapping[str, Any]], num_positions: int,
                violations: list[str]) -> dict[str, tuple[float | None, float]]:
    rounds = sum(int(r["num_draft_rounds"]) for r in ok)  # D
    accepted = sum(int(r["num_accepted_tokens"]) for r in ok)  # A
    out: dict[str, tuple[float | None, float]] = {
        "acceptance_length": (1.0 + accepted / rounds if rounds else 1.0, COUNT_RTOL)}
    if all(not _missing(r.get("num_draft_tokens")) for r in ok):
        proposed = sum(int(r["num_draft_tokens"]) for r in ok)  # T_d
        out["acceptance_rate"] = (accepted / proposed if proposed else None, COUNT_RTOL)
        for r in ok:
            if int(r["num_accepted_tokens"]) > int(r["num_draft_tokens"]):
                violations.append(f"request {r.get('request_index')}: accepted {r['num_accepted_tokens']} > "
                                  f"proposed {r['num_draft_tokens']}")
    per_pos = [_ints(r.get("num_accepted_per_pos")) for r in ok]
    if all(p is not None for p in per_pos):
        totals = [0] * max((len(p) for p in per_pos), default=0)  # A_k, k = 1..
        for r, p in zip(ok, per_pos):
            where = f"request {r.get('request_index')}"
            if sum(p) != int(r["num_accepted_tokens"]):
                violations.append(f"{where}: sum_k A_k {sum(p)} != A {r['num_accepted_tokens']}")
            if any(b > a for a, b in zip(p, p[1:])):
                violations.append(f"{where}: A_k increases with k {p}")
            if p and p[0] > int(r["num_draft_rounds"]):
                violations.append(f"{where}: A_1 {p[0]} > rounds {r['num_draft_rounds']}")
            for k, n in enumerate(p):
                totals[k] += n
        for k in range(num_positions):
            value = totals[k] / rounds if rounds and k < len(totals) else None
            out[f"accept_rate_pos_{k + 1}"] = (value, COUNT_RTOL)
    return out


def _differs(stored: Any, value: float | None, rtol: float) -> bool:
    if _missing(stored) or value is None:
        return _missing(stored) != (value is None)
    return not math.isclose(float(stored), value, rel_tol=rtol, abs_tol=TIME_ATOL if rtol == TIME_RTOL else 0.0)


def _fmt(value: Any) -> str:
    return "null" if _missing(value) else f"{float(value):.6g}"


def consistency_columns(cell: Mapping[str, Any], request_rows: Sequence[Mapping[str, Any]], num_positions: int,
                        step_rows: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """is_metrics_consistent (null without a successful request) and metrics_mismatch ('name stored vs
    recomputed x; ...' plus broken invariants; null when consistent). Acceptance from a server's /metrics
    counters is not per request, so it is left out. The cell's own is_acceptance_consistent (acceptance length vs
    1 + the sum of per-position rates) is enforced here too: false makes the cell inconsistent (flagged, WARNING)."""
    if not any(_missing(r.get("error")) for r in request_rows):
        return {"is_metrics_consistent": None, "metrics_mismatch": None}
    result = recompute(request_rows, num_positions, step_rows=step_rows,
                       with_acceptance=cell.get("acceptance_source") in PER_REQUEST_SOURCES)
    problems = [f"{name} {_fmt(cell.get(name))} vs recomputed {_fmt(value)}"
                for name, (value, rtol) in result.values.items() if _differs(cell.get(name), value, rtol)]
    if cell.get("is_acceptance_consistent") is False:  # the production code's own identity check
        problems.append(f"acceptance_length {_fmt(cell.get('acceptance_length'))} != 1 + sum_k p_k "
                        f"{_fmt(cell.get('acceptance_length_from_positions'))} (is_acceptance_consistent false)")
    problems += result.violations
    if cell.get("acceptance_source") == "engine":
        problems += emission_violations(request_rows, num_positions)
    return {"is_metrics_consistent": not problems, "metrics_mismatch": "; ".join(problems) or None}


def emission_violations(request_rows: Sequence[Mapping[str, Any]], max_num_draft: int) -> list[str]:
    """Per request, the acceptance counter against the tokens its emissions carried, for an engine's own records
    (acceptance_source "engine"; HTTP chunks may merge or split emissions): an emission carries a round's accepted
    drafts + 1 tokens (a prefill's: 1), but the last, which a stop may cut by up to max_num_draft tokens, so
    out - emissions <= A_i <= out - emissions + max_num_draft."""
    violations = []
    for r in (r for r in request_rows if _missing(r.get("error"))):
        sizes = _ints(r["tokens_per_emission"]) or []
        emitted = sum(sizes) - len(sizes)  # accepted drafts the emissions carried
        accepted = int(r["num_accepted_tokens"])
        if not emitted <= accepted <= emitted + max_num_draft:
            violations.append(f"request {r.get('request_index')}: accepted {accepted} vs {emitted} carried by its "
                              f"emissions (+ up to {max_num_draft} cut by a stop)")
    return violations


def step_total_violations(request_rows: Sequence[Mapping[str, Any]],
                          step_rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The steps' drafted / accepted totals (counted where the verifier's result is read, per step) against the sums
    of the requests' counters (counted per request and round), for a run whose step rows hold exactly these requests'
    rounds (one engine run of its own, as the selftest's metrics check makes; not a sweep window, whose steps may
    also serve warmup requests)."""
    ok = [r for r in request_rows if _missing(r.get("error"))]
    violations = []
    for column in ("num_draft_tokens", "num_accepted_tokens"):
        in_steps = sum(int(s[column]) for s in step_rows)
        in_requests = sum(int(r[column]) for r in ok)
        if in_steps != in_requests:
            violations.append(f"{column}: steps total {in_steps} != requests total {in_requests}")
    return tuple(violations)
