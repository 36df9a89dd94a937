"""Anomalies: a server's report that fails a sanity check. Each kind is declared once here; the checks
(backends/anomalies.py), the result columns (schema.py) and the summary lines derive from this table.

A fatal kind makes its request an error (`error` = "<kind>: <detail>", left out of every metric): its numbers
cannot be true, so no metric may be computed from them. The others are recorded and counted beside a success.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class AnomalyKind(Enum):
    # value: (name in the results, is fatal, what it means)
    NEGATIVE_COUNT = ("negative_count", True, "the server reported a negative token count")
    ABSURD_COUNT = ("absurd_count", True, "a token count no response could hold: more completion tokens than "
                    "max_tokens + slack, more than 10 x (bytes of streamed text + 1) + slack, or a prompt count "
                    "over 10 x the local one + slack")
    OVER_MAX_TOKENS = ("over_max_tokens", False, "more output tokens than the request's max_tokens (within slack)")
    USAGE_MISMATCH = ("usage_mismatch", False, "the usage block disagrees with the streamed chunks: fewer tokens "
                      "than text chunks, per-chunk counts going down or ending elsewhere than the final total, or "
                      "the re-tokenised text off by more than the tolerance")
    MODEL_MISMATCH = ("model_mismatch", False, "the response names another model than the one asked")
    COUNTER_BACKWARDS = ("counter_backwards", False, "a /metrics counter went down during the cell (restart?)")
    COUNTER_MISMATCH = ("counter_mismatch", False, "a /metrics counter delta is below the sum of what the cell's "
                        "responses reported (generated, drafted or accepted tokens)")

    def __init__(self, label: str, is_fatal: bool, description: str) -> None:
        self.label = label
        self.is_fatal = is_fatal
        self.description = description


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: AnomalyKind
    detail: str  # what was reported against what was expected, one line

    def __str__(self) -> str:
        return f"{self.kind.label}: {self.detail}"


def kind_label(text: str) -> str:
    """The kind of a stored 'kind: detail' string."""
    return text.split(":", 1)[0]


def summarize(labels: Iterable[str]) -> str | None:
    """'2 x usage_mismatch; 1 x model_mismatch' (most frequent first); None when empty."""
    return "; ".join(f"{n} x {label}" for label, n in Counter(labels).most_common()) or None


def kinds_doc() -> str:
    """Every kind and its meaning, for the column docs; fatal kinds marked."""
    return "; ".join(f"{k.label}{' (fatal)' if k.is_fatal else ''}" for k in AnomalyKind)
