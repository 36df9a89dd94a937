"""Acceptance and agreement with k = 0 per category and per sampling mode, with request counts and 95% intervals.

At the workload's default temperatures (mt_bench: FastChat's per-category table, 0 for math, coding, reasoning and
extraction, 0.7 or more for the rest) one cell mixes greedy and sampled requests, and "same text as k = 0" means two
things there: greedy, what a lossless engine gives every time; sampled, two draws agreeing by chance. So per grid
point (temperature, concurrency, k > 0, tree shape; pooled over repeats) the requests are split by their own
temperature (greedy t = 0, sampled t > 0) and by category. Acceptance length is pooled (1 + sum A / sum D) with the
95% t-interval of the ratio over requests (compare/plot_data.weighted_mean_ci); same text pairs each request with
the k = 0 request of the same repeat, temperature, concurrency, sample and turn, with its Wilson interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.compare.plot_data import weighted_mean_ci
from specbench.metrics import definitions
from specbench.metrics.proportion import wilson_interval
from specbench.runs.cell_key import shape_text
from specbench.runs.records import Row, is_null

GREEDY, SAMPLED = "greedy (t=0)", "sampled (t>0)"


@dataclass(frozen=True)
class GroupSummary:
    point: str  # the grid point, e.g. "t=default c=1 k=3"
    group: str  # GREEDY, SAMPLED or a category
    temperatures: str  # the requests' own temperatures, e.g. "0" or "0.7,1"
    num_requests: int
    acceptance_length: float | None  # pooled 1 + A / D; None without draft rounds
    acceptance_interval: tuple[float, float] | None  # 95%; None with fewer than 3 requests that drafted
    num_pairs: int  # requests paired with a k = 0 request
    same_text: float | None  # share of pairs with the same text; None without pairs
    same_text_interval: tuple[float, float] | None  # 95% Wilson


def _temperature(row: Row) -> float:
    t = row.get("request_temperature")
    return float("nan") if is_null(t) else float(t)


def _point(row: Row) -> str:
    t = row["temperature"]
    label = "default" if is_null(t) or math.isnan(float(t)) else format(float(t), "g")
    return f"t={label} c={row['concurrency']} k={row['num_steps']}{shape_text(row)}"


def _baseline_key(row: Row) -> tuple:
    t = row["temperature"]
    return (row["repeat"], "nan" if is_null(t) or math.isnan(float(t)) else float(t), row["concurrency"],
            row["sample_id"], row["turn"])


def _summary(point: str, group: str, rows: Sequence[Row], baseline: dict[tuple, str]) -> GroupSummary:
    drafted = [r for r in rows if not is_null(r.get("num_draft_rounds")) and r["num_draft_rounds"] > 0
               and not is_null(r.get("num_accepted_tokens"))]
    al = interval = None
    if drafted:
        values = [definitions.acceptance_length(r["num_accepted_tokens"], r["num_draft_rounds"]) for r in drafted]
        al, half = weighted_mean_ci(values, [float(r["num_draft_rounds"]) for r in drafted])
        interval = None if math.isnan(half) else (max(1.0, al - half), al + half)
    pairs = [(r["output_text"] or "", baseline[_baseline_key(r)]) for r in rows if _baseline_key(r) in baseline]
    same = sum(a == b for a, b in pairs) / len(pairs) if pairs else None
    temps = sorted({_temperature(r) for r in rows if not math.isnan(_temperature(r))})
    return GroupSummary(point, group, ",".join(format(t, "g") for t in temps) or "-", len(rows), al, interval,
                        len(pairs), same, None if same is None else wilson_interval(same, len(pairs)))


def group_summaries(requests: Sequence[Row]) -> list[GroupSummary]:
    """Per speculative grid point: the greedy and the sampled requests (only where the point mixes them), then each
    category (only where there are several); failed requests left out."""
    ok = [r for r in requests if is_null(r.get("error"))]
    baseline = {_baseline_key(r): r["output_text"] or "" for r in ok if r["num_steps"] == 0}
    points: dict[str, list[Row]] = {}
    for row in ok:
        if row["num_steps"] > 0:
            points.setdefault(_point(row), []).append(row)
    out = []
    for point, rows in points.items():
        greedy = [r for r in rows if _temperature(r) == 0]
        sampled = [r for r in rows if _temperature(r) > 0]
        if greedy and sampled:
            out += [_summary(point, GREEDY, greedy, baseline), _summary(point, SAMPLED, sampled, baseline)]
        categories: dict[str, list[Row]] = {}
        for row in rows:
            categories.setdefault(str(row["category"]), []).append(row)
        if len(categories) > 1:
            out += [_summary(point, name, members, baseline) for name, members in categories.items()]
    return out


def _value(value: float | None, interval: tuple[float, float] | None, digits: int) -> str:
    if value is None:
        return "-"
    text = f"{value:.{digits}f}"
    return text + (f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval is not None else "")


def format_group_summaries(groups: Sequence[GroupSummary]) -> str:
    """One line per (grid point, group): a long table that fits 120 columns whatever the grid."""
    if not groups:
        return ""
    head = ("point", "group", "temp", "n", "acceptance length", "same text as k=0")
    body = [(g.point, g.group, g.temperatures, str(g.num_requests),
             _value(g.acceptance_length, g.acceptance_interval, 2),
             _value(g.same_text, g.same_text_interval, 2) + (f" ({g.num_pairs} pairs)" if g.num_pairs else ""))
            for g in groups]
    widths = [max(len(h), *(len(line[i]) for line in body)) for i, h in enumerate(head)]
    lines = ["per sampling mode and category (n: requests over repeats; [95% interval]; only greedy text must match)"]
    lines.append("  ".join(h.ljust(w) if i < 3 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
    lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
    last = None
    for line in body:
        cells = [("" if line[0] == last else line[0]), *line[1:]]
        last = line[0]
        lines.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))))
    return "\n".join(lines)


def mixed_sampling_note(groups: Sequence[GroupSummary]) -> str:
    """The summary's "Same text as k=0" of a point that mixes greedy and sampled requests pools both: say so."""
    mixed = {g.point: g for g in groups if g.group == GREEDY}
    if not mixed:
        return ""
    sampled = {g.point: g for g in groups if g.group == SAMPLED}
    point = next(iter(mixed))
    g, s = mixed[point], sampled[point]
    return (f"note: at the workload's default temperatures a cell mixes greedy and sampled requests (e.g. {point}: "
            f"{g.num_requests} greedy, {s.num_requests} sampled at t={s.temperatures}); the summary's agreement rows "
            f"pool both: read them split in the table per sampling mode below (only the greedy share measures "
            f"losslessness)")
