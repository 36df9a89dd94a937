"""Per-request views behind a comparison: the questions whose answers changed, acceptance per position and category."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.compare.loading import Run
from specbench.compare.matching import DEFAULT_TEMPERATURE, format_temperature
from specbench.metrics import definitions

CELL = ["workload", "method", "num_steps", "temperature", "concurrency", "repeat"]
QUESTION = ["sample_id", "turn"]


def _keyed(requests: pd.DataFrame) -> pd.DataFrame:
    return requests.assign(temperature=requests["temperature"].fillna(DEFAULT_TEMPERATURE))


def changed_answers(before: Run, after: Run, answer: str = "flexible") -> pd.DataFrame:
    """Requests of matching cells (same repeat and question) whose extracted answer (or, for speed-only
    workloads, completion text) differs; correctness columns show which way each one moved."""
    column = {"flexible": "flexible_normalized", "strict": "strict_normalized", "text": "output_text"}[answer]
    keep = CELL + QUESTION + [column, "is_flexible_match", "is_strict_match", "gold_answer", "output_text"]
    pairs = _keyed(before.requests)[keep].merge(
        _keyed(after.requests)[keep], on=CELL + QUESTION, suffixes=("_before", "_after")
    )
    if column == "output_text":
        changed = pairs["output_text_before"].fillna("") != pairs["output_text_after"].fillna("")
    else:
        scored = pairs["gold_answer_before"].notna() & pairs["gold_answer_after"].notna()
        changed = scored & (pairs[f"{column}_before"] != pairs[f"{column}_after"])
    out = pairs[changed].sort_values(CELL + QUESTION).reset_index(drop=True)
    columns = CELL + QUESTION + ["gold_answer_before"]
    columns += [f"{column}_before", f"{column}_after"] if column != "output_text" else []
    columns += ["is_flexible_match_before", "is_flexible_match_after", "output_text_before", "output_text_after"]
    return out[list(dict.fromkeys(columns))].rename(columns={"gold_answer_before": "gold_answer"})


def acceptance_by_category(run: Run) -> pd.DataFrame:
    """Per (num_steps, temperature, category): rounds, acceptance length, rate and p_k pooled over concurrency and
    repeats, from the requests' own counts (engine, or the server's response bodies over HTTP). NaN where no
    request of the group carries them: /metrics counter deltas are per cell, never per category (the cell values
    are in compare and the plots). The rate needs only drafted and accepted tokens (llama.cpp's `timings`)."""
    frame = _keyed(run.requests)
    frame = frame[frame["num_steps"] > 0]
    rows = []
    for (num_steps, temperature, category), group in frame.groupby(["num_steps", "temperature", "category"]):
        rounds = group["num_draft_rounds"].sum(min_count=1)  # NaN when no request has the count
        accepted = group["num_accepted_tokens"].sum(min_count=1)
        drafted = group["num_draft_tokens"].sum(min_count=1)
        per_pos = np.zeros(int(num_steps))
        for counts in group["num_accepted_per_pos"].dropna():
            per_pos[: len(counts)] += np.asarray(counts, dtype=float)[: int(num_steps)]
        has_rounds = rounds > 0  # False for NaN
        row = {"num_steps": num_steps, "temperature": temperature, "category": category,
               "num_requests": len(group), "num_draft_rounds": rounds,
               "acceptance_length": definitions.acceptance_length(accepted, rounds) if has_rounds else np.nan,
               "acceptance_rate": definitions.acceptance_rate(accepted, drafted) if drafted > 0 else np.nan}
        row.update({f"p_{k + 1}": definitions.position_acceptance_rate(per_pos[k], rounds) if has_rounds else np.nan
                    for k in range(int(num_steps))})
        rows.append(row)
    return pd.DataFrame(rows)


def format_changed(changed: pd.DataFrame, limit: int) -> str:
    """A short text listing for the CLI (--show-changed N)."""
    if changed.empty:
        return "no request changed its answer between the runs"
    lines = [f"{len(changed)} request(s) changed their answer; first {min(limit, len(changed))}:"]
    answer = next((c for c in changed.columns if c.endswith("_normalized_before")), None)
    for _, r in changed.head(limit).iterrows():
        where = f"k={r['num_steps']} t={format_temperature(r['temperature'])} c={r['concurrency']} r={r['repeat']}"
        if answer:
            after = answer.replace("_before", "_after")
            moved = f"{r[answer]!r} -> {r[after]!r} (gold {r['gold_answer']!r})"
        else:
            moved = f"{str(r['output_text_before'])[:40]!r} -> {str(r['output_text_after'])[:40]!r}"
        lines.append(f"  {where} sample {r['sample_id']} turn {r['turn']}: {moved}")
    return "\n".join(lines)
