"""A server's prefix-cache hit rate over a cell's measured window, from its own /metrics.

Names, from each engine's docs: vLLM (V1 engine) counts `vllm:prefix_cache_queries` and `vllm:prefix_cache_hits`
(counters, in prompt tokens: hit rate over the window = delta hits / delta queries); older vLLM exposes only the
gauge `vllm:gpu_prefix_cache_hit_rate`; SGLang the gauge `sglang:cache_hit_rate` (its radix cache's running hit
rate). A gauge has no window: the value at the window's end is kept and the source says "gauge". llama.cpp's
server counts `llamacpp:prompt_tokens_cached` (prompt tokens reused from its cache) and `llamacpp:prompt_tokens`
(processed, cached ones excluded): hits = cached, queries = cached + processed. `specbench serve` exports vLLM's two
counters under its own namespace (`specbench:prefix_cache_hits` / `_queries`, serve/metrics.py). The embedded engine's
window is read from its own step statistics (embedded_window).
Label sets are summed (counters) or averaged (gauges). A server with prefix caching off exports the counters at 0:
no lookups in the window, a null rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.backends.prometheus import Sample
from specbench.backends.spec_counters import _total as counter_total  # `name_total` or bare, summed over labels

COUNTERS = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries")  # (hits, queries)
SPECBENCH_COUNTERS = ("specbench:prefix_cache_hits", "specbench:prefix_cache_queries")
LLAMACPP = ("llamacpp:prompt_tokens_cached", "llamacpp:prompt_tokens")  # (reused, processed excluding reused)
GAUGES = ("vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate")


@dataclass(frozen=True)
class PrefixCacheReading:
    """One /metrics scrape's prefix-cache numbers."""

    source: str  # the metric name(s) read
    num_hits: float | None  # counters (tokens); None for a gauge
    num_queries: float | None
    hit_rate: float | None  # a gauge's value; None for counters


@dataclass(frozen=True)
class PrefixCacheWindow:
    hit_rate: float | None  # in [0, 1]; None when unavailable (see note)
    source: str | None  # e.g. "vllm:prefix_cache_hits/queries" | "sglang:cache_hit_rate (gauge at window end)"
    note: str | None  # why hit_rate is None


def read_prefix_cache(samples: Sequence[Sample]) -> PrefixCacheReading | None:
    for family in (COUNTERS, SPECBENCH_COUNTERS):
        hits, queries = (counter_total(samples, name) for name in family)
        if hits is not None and queries is not None:
            return PrefixCacheReading(f"{family[0]}/queries", hits, queries, None)
    cached, processed = (counter_total(samples, name) for name in LLAMACPP)
    if cached is not None and processed is not None:
        return PrefixCacheReading(f"{LLAMACPP[0]}/(cached + processed)", cached, cached + processed, None)
    for gauge in GAUGES:
        values = [s.value for s in samples if s.name == gauge]
        if values:
            return PrefixCacheReading(gauge, None, None, sum(values) / len(values))
    return None


def prefix_cache_window(before: PrefixCacheReading | None, after: PrefixCacheReading | None) -> PrefixCacheWindow:
    if after is None:
        return PrefixCacheWindow(None, None, "the server's /metrics exports no prefix-cache metric")
    if after.hit_rate is not None:
        return PrefixCacheWindow(after.hit_rate, f"{after.source} (gauge at window end)", None)
    if before is None or before.num_hits is None or before.source != after.source:
        return PrefixCacheWindow(None, after.source, "no prefix-cache counters at the window's start")
    queries = after.num_queries - before.num_queries
    hits = after.num_hits - before.num_hits
    if queries < 0 or hits < 0:
        return PrefixCacheWindow(None, after.source, "the prefix-cache counters went down (restarted?)")
    if queries == 0:
        return PrefixCacheWindow(None, after.source, "no prefix-cache lookups in the window (caching off?)")
    return PrefixCacheWindow(hits / queries, after.source, None)


EMBEDDED = PrefixCacheWindow(None, None, "n/a: the embedded engine keeps no prefix cache")
ENGINE_SOURCE = "engine step stats: prefix hit tokens / queried tokens"


def embedded_window(steps: Sequence, prefix_caching: str) -> PrefixCacheWindow:
    """The embedded engine's hit rate over a window of its steps (engine/stats.py StepStats, in tokens as vLLM's
    counters); `prefix_caching`: "on", or why the engine caches nothing (EngineParts.prefix_caching)."""
    if prefix_caching != "on":
        return PrefixCacheWindow(None, None, f"n/a: the embedded engine's prefix caching is {prefix_caching}")
    queries = sum(s.num_prefix_queried_tokens for s in steps)
    if queries == 0:
        return PrefixCacheWindow(None, ENGINE_SOURCE, "no prefix-cache lookups in the window")
    return PrefixCacheWindow(sum(s.num_prefix_hit_tokens for s in steps) / queries, ENGINE_SOURCE, None)
