"""The summary's "is speculation working?" lines, per speculative cell: drafts at all (speculation silently off:
xLLM #2255, vLLM #54926), anything accepted, the server's acceptance counters agreeing with themselves (a counter
that over-counts by one per step: tokenspeed #1443), and speculation slower than k = 0 at equal quality (llama.cpp
#25908). The prefix-cache hit rate on vs off is check_notes.prefix_cache_lines'."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.runs.greedy_divergence import diverges
from specbench.runs.records import Row, is_null

MAX_NAMED = 4  # cells named per warning line
SLOWER_MARGIN = 0.03  # a speedup below 1 - this is "slower than k = 0" (above: within a timing's own jitter)


def _named(rows: Sequence[Row], text) -> str:
    more = f", +{len(rows) - MAX_NAMED} more" if len(rows) > MAX_NAMED else ""
    return ", ".join(text(r) for r in rows[:MAX_NAMED]) + more


def speculation_lines(cells: Sequence[Row]) -> list[str]:
    speculative = [r for r in cells if r["num_steps"]]
    lines = []
    silent = [r for r in speculative if not is_null(r.get("num_draft_tokens")) and r["num_draft_tokens"] == 0]
    if silent:
        lines.append(f"WARNING: speculation silently off: {len(silent)} of {len(speculative)} speculative cells "
                     f"drafted nothing ({_named(silent, lambda r: r['cell_id'])}): their k measures plain decoding")
    rejected = [r for r in speculative if not is_null(r.get("num_draft_tokens")) and r["num_draft_tokens"]
                and not is_null(r.get("num_accepted_tokens")) and r["num_accepted_tokens"] == 0]
    if rejected:
        lines.append(f"WARNING: nothing accepted: {len(rejected)} speculative cells drafted tokens and accepted none "
                     f"({_named(rejected, _drafted_text)}): a drafter that never agrees with the target (wrong "
                     "model or tokenizer, broken state)")
    inconsistent = [r for r in speculative if r.get("is_acceptance_consistent") is False]
    if inconsistent:
        lines.append(f"WARNING: the server's acceptance counters disagree with each other in {len(inconsistent)} "
                     f"cells ({_named(inconsistent, _counter_text)}): a counter bug in the server (its acceptance "
                     "length and its per-position counts cannot both be right)")
    slower = [r for r in speculative if not is_null(r.get("speedup")) and r["speedup"] < 1 - SLOWER_MARGIN
              and not diverges(r) and r.get("is_drift_suspect") is not True]
    if slower:
        lines.append(f"WARNING: speculation slower than k = 0 at equal quality in {len(slower)} of "
                     f"{len(speculative)} speculative cells ({_named(slower, _speedup_text)}): turn it off there, "
                     "or lower k")
    return lines


def _drafted_text(row: Row) -> str:
    return f"{row['cell_id']} {row['num_draft_tokens']} drafted"


def _counter_text(row: Row) -> str:
    return (f"{row['cell_id']} AL {row['acceptance_length']:.3f} vs {row['acceptance_length_from_positions']:.3f} "
            "from its per-position counts")


def _speedup_text(row: Row) -> str:
    return f"{row['cell_id']} speedup {row['speedup']:.3f}"
