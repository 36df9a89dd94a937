"""Output tokens per streamed chunk, from the best source available, totals matched to the server's usage."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.backends.stream_state import StreamState

SERVER_PER_CHUNK = "server_per_chunk"  # cumulative usage in every chunk (continuous_usage_stats): exact
RETOKENIZED = "retokenized"  # the chunks' text re-tokenised with the local tokenizer (boundaries approximate)
ONE_PER_CHUNK = "one_per_chunk"  # no per-chunk counts and no tokenizer: each chunk counts one, the last the rest


@dataclass(frozen=True, slots=True)
class TokenCounts:
    emission_times: tuple[float, ...]  # [num_emissions] perf_counter of each emission
    tokens_per_emission: tuple[int, ...]  # [num_emissions]; sums to the server's usage total when it sent one
    source: str  # SERVER_PER_CHUNK | RETOKENIZED | ONE_PER_CHUNK


def count_tokens(state: StreamState, tokenizer=None) -> TokenCounts:
    """`tokenizer`: a transformers tokenizer for the fallback, or None.

    Emissions are the chunks that carried text. A response whose text is empty but whose usage counts tokens (the
    first token was end-of-sequence: usage says 1) has one emission, its last event, carrying that count.
    """
    emissions = state.content_chunks
    if not emissions and state.completion_tokens and state.chunks:
        last = state.chunks[-1]
        return TokenCounts((last.time,), (state.completion_tokens,), _untextual_source(state, tokenizer))
    times = tuple(c.time for c in emissions)
    per_chunk = _server_per_chunk(state)
    if per_chunk is not None:
        return TokenCounts(times, per_chunk, SERVER_PER_CHUNK)
    texts = [c.emitted for c in state.content_chunks]
    if tokenizer is not None:
        lengths = [0]
        prefix = ""
        for text in texts:  # prefix lengths: a token spanning two chunks is counted once
            prefix += text
            lengths.append(len(tokenizer(prefix, add_special_tokens=False)["input_ids"]))
        counts = [max(b - a, 0) for a, b in zip(lengths, lengths[1:])]
        total = state.completion_tokens if state.completion_tokens is not None else lengths[-1]
        return TokenCounts(times, _match_total(counts, total), RETOKENIZED)
    counts = [1] * len(texts)
    total = state.completion_tokens if state.completion_tokens is not None else len(texts)
    return TokenCounts(times, _match_total(counts, total), ONE_PER_CHUNK)


def _untextual_source(state: StreamState, tokenizer) -> str:
    """How a text-less response's count is known: the server's own per-event usage, else its final usage block."""
    if any(c.completion_tokens is not None for c in state.chunks[:-1]):
        return SERVER_PER_CHUNK
    return RETOKENIZED if tokenizer is not None else ONE_PER_CHUNK


def _server_per_chunk(state: StreamState) -> tuple[int, ...] | None:
    """Differences of the cumulative completion_tokens at each content chunk; tokens reported on text-less
    events go to the next content chunk (or the last one, after it)."""
    counts: list[int] = []
    previous = 0
    for chunk in state.chunks:
        if not chunk.emitted:
            continue
        if chunk.completion_tokens is None or chunk.completion_tokens < previous:
            return None
        counts.append(chunk.completion_tokens - previous)
        previous = chunk.completion_tokens
    if not counts:
        return None
    total = state.completion_tokens if state.completion_tokens is not None else previous
    return _match_total(counts, total)


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
