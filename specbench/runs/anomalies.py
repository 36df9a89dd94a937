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


# Thresholds of the checks (backends/anomalies.py), here so the kinds' descriptions state them.
OVER_MAX_TOKENS_SLACK = 16  # tokens past max_tokens before a count is absurd (a long speculative round's overshoot)
TEXT_FACTOR = 10  # a token decodes to >= 1 byte but for special and partial-character tokens: 10x is no response
TEXT_SLACK = 16  # ...plus this many text-less tokens (end-of-sequence, stop strings)
PROMPT_SLACK = 1024  # prompt tokens a server's chat template and default system prompt may add
RETOKENIZED_TOLERANCE = (4, 0.1)  # usage may differ from the re-tokenised text by 4 tokens + 10% (merges, stops)
DRAFT_FACTOR = 256  # draft tokens per output token no drafter proposes (n-gram drafts reach ~40 per round)


class AnomalyKind(Enum):
    # value: (name in the results, is fatal, what it means)
    NEGATIVE_COUNT = ("negative_count", True, "the server reported a negative token count (usage, or the response's "
                      "draft counts)")
    ABSURD_COUNT = ("absurd_count", True, "a token count no response could hold: completion tokens over max_tokens "
                    f"+ {OVER_MAX_TOKENS_SLACK}, or over {TEXT_FACTOR} x (bytes of streamed text + 1) + {TEXT_SLACK} "
                    f"(unless ignore_eos), prompt tokens over {TEXT_FACTOR} x the local count + {PROMPT_SLACK}, or a response's draft "
                    f"count over {DRAFT_FACTOR} x (max_tokens + {OVER_MAX_TOKENS_SLACK})")
    OVER_MAX_TOKENS = ("over_max_tokens", False, "more output tokens than the request's max_tokens (from usage, else "
                       "the chunks with text)")
    USAGE_MISMATCH = ("usage_mismatch", False, "the usage disagrees with the streamed chunks: fewer tokens than "
                      "chunks with text, per-chunk counts going down, or the text re-tokenised locally off by more "
                      f"than {RETOKENIZED_TOLERANCE[0]} + {RETOKENIZED_TOLERANCE[1]:.0%}")
    DRAFT_MISMATCH = ("draft_mismatch", False, "a response's own draft counts contradict each other or its usage: "
                      "more accepted draft tokens than drafted, or than completion tokens")
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
