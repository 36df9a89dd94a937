"""Output tokens per streamed event, from the best source available, totals matched to the server's usage.

The end of a request is its last token, with or without text (metrics/definitions.py). Under per-chunk usage every
event that brings tokens is an emission; otherwise the events with text are, and a token without text (the
end-of-sequence token, the end of a stop string) goes to the text-less event that carries the finish_reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.backends.stream_state import Chunk, StreamState

SERVER_PER_CHUNK = "server_per_chunk"  # cumulative usage in every chunk (continuous_usage_stats): exact
RETOKENIZED = "retokenized"  # the chunks' text re-tokenised with the local tokenizer (boundaries approximate)
ONE_PER_CHUNK = "one_per_chunk"  # no per-chunk counts and no tokenizer: each chunk counts one, the last the rest


@dataclass(frozen=True, slots=True)
class TokenCounts:
    emission_times: tuple[float, ...]  # [num_emissions] perf_counter of each emission
    tokens_per_emission: tuple[int, ...]  # [num_emissions]; sums to the server's usage total when it sent one
    source: str  # SERVER_PER_CHUNK | RETOKENIZED | ONE_PER_CHUNK


def count_tokens(state: StreamState, tokenizer=None, *, use_usage: bool = True) -> TokenCounts:
    """`tokenizer`: a transformers tokenizer for the fallback, or None. `use_usage=False`: ignore every count the
    server sent (its report failed a sanity check), count the text alone.

    Emissions are the chunks that carried text, plus the closing text-less event when it brings tokens not yet
    counted: exactly so under per-chunk usage; otherwise the tokens the usage total has beyond the text's count,
    placed on the text-less finish event unless the response ended by length or finished on a chunk with text
    (then that step had text, as far as anyone can tell: they stay on the last text chunk).
    """
    chunks = state.chunks
    last_text = max((i for i, c in enumerate(chunks) if c.emitted), default=-1)
    emissions = [c for c in chunks[: last_text + 1] if c.emitted]
    total = state.completion_tokens if use_usage else None
    exact = _server_per_chunk(chunks) if use_usage else None
    if exact is not None:  # every event that brought tokens is an emission, the closing one included
        return TokenCounts(tuple(exact[0]), tuple(_match_total(exact[1], total if total is not None
                                                               else sum(exact[1]))), SERVER_PER_CHUNK)
    tail = chunks[last_text + 1:]  # text-less events after the last text: the finish event, the usage block
    if not emissions:
        is_exact = use_usage and any(c.completion_tokens is not None for c in chunks[:-1])
        counts, source = [], SERVER_PER_CHUNK if is_exact else _local_source(tokenizer)
    elif tokenizer is not None:
        counts, source, is_exact = _retokenized([c.emitted for c in emissions], tokenizer), RETOKENIZED, False
    else:
        counts, source, is_exact = [1] * len(emissions), ONE_PER_CHUNK, False
    times = [c.time for c in emissions]
    counted = sum(counts)
    if total is not None and total > counted:
        end = _closing_event(tail, counted, is_exact, state.finish_reason, bool(emissions))
        if end is not None:
            return TokenCounts((*times, end.time), (*counts, total - counted), source)
    if total is not None:
        counts = list(_match_total(counts, total))
    return TokenCounts(tuple(times), tuple(counts), source)


def _local_source(tokenizer) -> str:
    return RETOKENIZED if tokenizer is not None else ONE_PER_CHUNK


def _retokenized(texts: Sequence[str], tokenizer) -> list[int]:
    """Prefix lengths, so a token spanning two chunks is counted once; every text chunk holds >= 1 token."""
    lengths = [0]
    prefix = ""
    for text in texts:
        prefix += text
        lengths.append(len(tokenizer(prefix, add_special_tokens=False)["input_ids"]))
    return [max(b - a, 1) for a, b in zip(lengths, lengths[1:])]


def _closing_event(tail: Sequence[Chunk], counted: int, is_exact: bool, finish_reason: str | None,
                   has_text: bool) -> Chunk | None:
    """The text-less event that closed the request with tokens beyond `counted`, or None (they stay on the last
    text chunk). Exact counts name it; otherwise it is the text-less finish event, unless the request ended by
    length or its finish_reason came with text (that step had text: its tokens are the last text chunk's)."""
    if is_exact:
        return next((c for c in tail if c.completion_tokens is not None and c.completion_tokens > counted), None)
    if has_text and finish_reason == "length":
        return None
    end = next((c for c in tail if c.finish_reason is not None), None)
    return end if end is not None or has_text else (tail[-1] if tail else None)


def _server_per_chunk(chunks: Sequence[Chunk]) -> tuple[list[float], list[int]] | None:
    """(times, counts) of the events that brought tokens: the cumulative completion_tokens rose, or text came
    (every text chunk is an emission). A text-less event that brings tokens is one too: a step whose text the
    server held back, or the end-of-sequence step. None when a text chunk lacks its count or the counts go down."""
    times: list[float] = []
    counts: list[int] = []
    previous = 0
    for chunk in chunks:
        if chunk.completion_tokens is None:
            if chunk.emitted:
                return None
            continue
        if chunk.completion_tokens < previous:
            return None
        if chunk.completion_tokens > previous or chunk.emitted:
            times.append(chunk.time)
            counts.append(chunk.completion_tokens - previous)
            previous = chunk.completion_tokens
    return (times, counts) if any(c.emitted for c in chunks) else None


def _match_total(counts: list[int], total: int) -> tuple[int, ...]:
    """Make the counts sum to `total`: add to the last emission, or take from the end (never below 0)."""
    out = list(counts)
    if not out:
        return ()
    missing = total - sum(out)
    if missing >= 0:
        out[-1] += missing
        return tuple(out)
    for i in reversed(range(len(out))):
        take = min(out[i], -missing)
        out[i] -= take
        missing += take
        if missing == 0:
            break
    return tuple(out)
