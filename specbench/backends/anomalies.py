"""Sanity checks on what a server reports (kinds in runs/anomalies.py): per response, against what was asked and
what streamed; per cell, /metrics counters against themselves and against the responses. Nothing is believed
unchecked: a failed check is an anomaly, and a number no response could hold makes its request an error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import zip_longest

from specbench.backends.spec_counters import SpecCounters
from specbench.backends.stream_state import StreamState
from specbench.runs.anomalies import (
    DRAFT_FACTOR,
    OVER_MAX_TOKENS_SLACK,
    PROMPT_SLACK,
    RETOKENIZED_TOLERANCE,
    TEXT_FACTOR,
    TEXT_SLACK,
    Anomaly,
    AnomalyKind,
)
from specbench.runs.finished_turn import FinishedTurn
from specbench.runs.request_draft import RequestDraft


@dataclass(frozen=True, slots=True)
class Asked:
    """What the request asked, and what the client knows of its prompt."""

    model: str
    max_tokens: int
    num_prompt_tokens: int  # an upper-bound estimate: local token ids, else the prompt's UTF-8 bytes
    ignore_eos: bool  # text-less tokens may then be any number (a model repeating end-of-sequence)


def response_anomalies(state: StreamState, asked: Asked, tokenizer=None) -> tuple[Anomaly, ...]:
    """Every check one response fails; `tokenizer`: the local one, or None (no re-tokenised comparison)."""
    found: list[Anomaly] = []
    cumulative = [c.completion_tokens for c in state.chunks if c.completion_tokens is not None]  # usage block too
    completion, prompt = max(cumulative, default=None), state.prompt_tokens
    for name, value in (("usage.prompt_tokens", prompt), ("usage.completion_tokens", min(cumulative, default=None))):
        if value is not None and value < 0:
            found.append(Anomaly(AnomalyKind.NEGATIVE_COUNT, f"{name} = {value}"))
    text_bytes = len("".join(c.emitted for c in state.chunks).encode())
    if completion is not None and completion > asked.max_tokens + OVER_MAX_TOKENS_SLACK:
        found.append(Anomaly(AnomalyKind.ABSURD_COUNT, f"{completion} completion tokens for max_tokens "
                                                       f"{asked.max_tokens} (+{OVER_MAX_TOKENS_SLACK})"))
    elif completion is not None and not asked.ignore_eos and completion > TEXT_FACTOR * (text_bytes + 1) + TEXT_SLACK:
        found.append(Anomaly(AnomalyKind.ABSURD_COUNT, f"{completion} completion tokens for {text_bytes} bytes of "
                                                       "text"))
    if prompt is not None and prompt > TEXT_FACTOR * asked.num_prompt_tokens + PROMPT_SLACK:
        found.append(Anomaly(AnomalyKind.ABSURD_COUNT, f"{prompt} prompt tokens for a prompt of at most "
                                                       f"{asked.num_prompt_tokens}"))
    if any(a.kind.is_fatal for a in found):
        return tuple(found)  # the other checks compare numbers already known to be false
    found += _usage_mismatches(state, cumulative, tokenizer)
    num_text_chunks = len(state.content_chunks)  # each holds >= 1 token: a floor when no usage came
    if completion is not None and completion > asked.max_tokens:
        found.append(Anomaly(AnomalyKind.OVER_MAX_TOKENS, f"{completion} completion tokens for max_tokens "
                                                          f"{asked.max_tokens}"))
    elif completion is None and num_text_chunks > asked.max_tokens:
        found.append(Anomaly(AnomalyKind.OVER_MAX_TOKENS, f"{num_text_chunks} chunks with text for max_tokens "
                                                          f"{asked.max_tokens}"))
    others = [name for name in state.models if name != asked.model]
    if others:
        found.append(Anomaly(AnomalyKind.MODEL_MISMATCH, f"asked {asked.model!r}, the response names "
                                                         f"{', '.join(map(repr, others))}"))
    return tuple(found)


def draft_anomalies(draft: RequestDraft | None, state: StreamState, asked: Asked) -> tuple[Anomaly, ...]:
    """The per-response draft counts (llama.cpp timings, vLLM metrics, SGLang meta_info) against each other and
    the usage; negative or impossibly large ones are fatal."""
    if draft is None:
        return ()
    counts = {"draft rounds": draft.num_draft_rounds, "draft tokens": draft.num_draft_tokens,
              "accepted draft tokens": draft.num_accepted_tokens}
    known = {name: n for name, n in counts.items() if n is not None}
    known.update({f"accepted at position {k}": n for k, n in enumerate(draft.num_accepted_per_pos)})
    limit = DRAFT_FACTOR * (asked.max_tokens + OVER_MAX_TOKENS_SLACK)
    fatal = [Anomaly(AnomalyKind.NEGATIVE_COUNT, f"{draft.source} {name} = {n}") for name, n in known.items() if n < 0]
    fatal += [Anomaly(AnomalyKind.ABSURD_COUNT, f"{draft.source} {name} = {n} for max_tokens {asked.max_tokens}")
              for name, n in known.items() if n > limit]
    if fatal:
        return tuple(fatal)
    accepted, drafted, rounds = draft.num_accepted_tokens, draft.num_draft_tokens, draft.num_draft_rounds
    found = []
    if accepted is not None and drafted is not None and accepted > drafted:
        found.append(Anomaly(AnomalyKind.DRAFT_MISMATCH, f"{draft.source}: {accepted} accepted of {drafted} drafted"))
    # NOTE: the usage block is optional (a proxy may drop stream_options): without it the completion is bounded by
    # what was asked and what streamed, so the check still runs
    total, what = state.completion_tokens, "completion tokens"
    if total is None:
        total, what = _completion_ceiling(state, asked), "completion tokens at most (no usage: max_tokens and text)"
    if accepted is not None and accepted > total:
        found.append(Anomaly(AnomalyKind.DRAFT_MISMATCH, f"{draft.source}: {accepted} accepted draft tokens for "
                                                         f"{total} {what}"))
    per_pos = draft.num_accepted_per_pos  # A_k: position k accepted only where k - 1 was (a histogram's tails)
    if any(b > a for a, b in zip(per_pos, per_pos[1:])):
        found.append(Anomaly(AnomalyKind.DRAFT_MISMATCH, f"{draft.source}: accepted per position {list(per_pos)} "
                                                         "grows with the position"))
    elif per_pos and rounds is not None and per_pos[0] > rounds:
        found.append(Anomaly(AnomalyKind.DRAFT_MISMATCH, f"{draft.source}: {per_pos[0]} accepted at position 0 in "
                                                         f"{rounds} rounds"))
    elif per_pos and accepted is not None and sum(per_pos) != accepted:
        found.append(Anomaly(AnomalyKind.DRAFT_MISMATCH, f"{draft.source}: accepted per position sums to "
                                                         f"{sum(per_pos)}, not the {accepted} accepted"))
    return tuple(found)


def _completion_ceiling(state: StreamState, asked: Asked) -> int:
    """The most completion tokens a response without usage can hold: max_tokens (+ a round's overshoot), and unless
    ignore_eos, what its text can carry (the bounds response_anomalies calls absurd past)."""
    ceiling = asked.max_tokens + OVER_MAX_TOKENS_SLACK
    if not asked.ignore_eos:
        text_bytes = len("".join(c.emitted for c in state.chunks).encode())
        ceiling = min(ceiling, TEXT_FACTOR * (text_bytes + 1) + TEXT_SLACK)
    return ceiling


def _usage_mismatches(state: StreamState, cumulative: list[int], tokenizer) -> list[Anomaly]:
    out = []
    if any(b < a for a, b in zip(cumulative, cumulative[1:])):
        out.append(Anomaly(AnomalyKind.USAGE_MISMATCH, f"per-chunk completion_tokens go down ({_head(cumulative)})"))
    total = state.completion_tokens
    if total is None:
        return out
    num_text_chunks = len(state.content_chunks)
    if total < num_text_chunks:
        out.append(Anomaly(AnomalyKind.USAGE_MISMATCH, f"usage says {total} completion tokens for "
                                                       f"{num_text_chunks} chunks with text"))
    elif tokenizer is not None:
        text = "".join(c.emitted for c in state.chunks)
        local = len(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0
        absolute, relative = RETOKENIZED_TOLERANCE
        if abs(total - local) > absolute + relative * local:
            out.append(Anomaly(AnomalyKind.USAGE_MISMATCH, f"usage says {total} completion tokens, the text "
                                                           f"re-tokenises to {local}"))
    return out


def _head(values: list[int]) -> str:
    return ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "")


COUNTER_FIELDS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_generation_tokens")


def counters_backwards(before: SpecCounters | None, after: SpecCounters | None) -> tuple[Anomaly, ...]:
    """A counter that went down between the window's two scrapes (a restart, or a broken exporter)."""
    if before is None or after is None or before.source != after.source:
        return ()
    names = [f.name for f in fields(SpecCounters) if f.name in COUNTER_FIELDS]
    down = [f"{name} {getattr(before, name):g} -> {getattr(after, name):g}" for name in names
            if getattr(before, name) is not None and getattr(after, name) is not None
            and getattr(after, name) < getattr(before, name)]
    # a position missing from one scrape is at 0 there (a position that vanished went down to 0)
    positions = [f"accepted at position {k} {b:g} -> {a:g}" for k, (b, a) in
                 enumerate(zip_longest(before.num_accepted_per_pos, after.num_accepted_per_pos, fillvalue=0.0))
                 if a < b]
    return tuple(Anomaly(AnomalyKind.COUNTER_BACKWARDS, f"{after.source} {what}") for what in down + positions)


@dataclass(frozen=True, slots=True)
class ResponseTotals:
    """What a cell's successful responses reported, summed (None: no response reported it)."""

    num_generated: int | None  # usage.completion_tokens; without usage, the chunks with text (>= 1 token each)
    num_draft_tokens: int | None  # per-response draft counts (llama.cpp timings, ...)
    num_accepted_tokens: int | None

    @classmethod
    def of(cls, finished: Sequence[FinishedTurn]) -> ResponseTotals:
        ok = [item for item in finished if item.error is None]
        drafts = [item.server_draft for item in ok if item.server_draft is not None]

        def total(values: list[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        # NOTE: usage is optional (a proxy may drop stream_options): a response without it still generated at least
        # one token per emission (a chunk with text), so the counter check keeps a floor to compare with
        return cls(total([item.output.stats.num_output_tokens if item.is_usage_reported else
                          len(item.output.stats.emission_times) for item in ok]),
                   total([d.num_draft_tokens for d in drafts]), total([d.num_accepted_tokens for d in drafts]))


def cell_counter_anomalies(delta: SpecCounters | None, finished: Sequence[FinishedTurn]) -> tuple[str, ...]:
    """The window's counter deltas against the cell's responses, as stored strings."""
    return tuple(map(str, counters_below_responses(delta, ResponseTotals.of(finished))))


def counters_below_responses(delta: SpecCounters | None, totals: ResponseTotals) -> tuple[Anomaly, ...]:
    """A server counts every token it generates, the cell's among them: a window delta below the responses' sum
    contradicts them (above it is other traffic, or failed requests)."""
    if delta is None:
        return ()
    pairs = (("generated tokens", delta.num_generation_tokens, totals.num_generated),
             ("draft tokens", delta.num_draft_tokens, totals.num_draft_tokens),
             ("accepted tokens", delta.num_accepted_tokens, totals.num_accepted_tokens))
    return tuple(Anomaly(AnomalyKind.COUNTER_MISMATCH, f"{delta.source} counted {counted:g} {what} in the window, "
                                                       f"the responses report {reported}")
                 for what, counted, reported in pairs
                 if counted is not None and reported is not None and counted < reported)
