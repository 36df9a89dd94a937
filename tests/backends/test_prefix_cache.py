"""Prefix-cache hit rate over a window from /metrics text (backends/prefix_cache.py); fixtures: fixtures/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.backends.prefix_cache import EMBEDDED, prefix_cache_window, read_prefix_cache
from specbench.backends.prometheus import parse_metrics

FIXTURES = Path(__file__).with_name("fixtures")


def _read(name: str):
    return read_prefix_cache(parse_metrics((FIXTURES / name).read_text()))


def test_vllm_counters_give_the_window_rate():
    window = prefix_cache_window(_read("vllm_prefix_cache_before.txt"), _read("vllm_prefix_cache_after.txt"))
    assert window.hit_rate == pytest.approx(1500 / 2000)
    assert window.source == "vllm:prefix_cache_hits/queries" and window.note is None


def test_llamacpp_recorded_counters():
    """The recorded request reused nothing: 43 prompt tokens processed, 0 cached."""
    window = prefix_cache_window(_read("llamacpp_metrics_before.txt"), _read("llamacpp_metrics_after.txt"))
    assert window.hit_rate == 0.0 and window.source.startswith("llamacpp:prompt_tokens_cached")


def test_sglang_gauge_is_read_at_window_end():
    window = prefix_cache_window(None, _read("sglang_cache_metrics.txt"))
    assert window.hit_rate == 0.4375 and window.source == "sglang:cache_hit_rate (gauge at window end)"


def test_unavailable_and_broken_windows_say_why():
    assert prefix_cache_window(None, _read("vllm_metrics.txt")).note.startswith("the server's /metrics exports no")
    after = _read("vllm_prefix_cache_after.txt")
    assert "no prefix-cache lookups" in prefix_cache_window(after, after).note
    assert "went down" in prefix_cache_window(after, _read("vllm_prefix_cache_before.txt")).note
    assert EMBEDDED.hit_rate is None and EMBEDDED.note.startswith("n/a")


def test_embedded_window_reads_the_engine_step_stats():
    from types import SimpleNamespace

    from specbench.backends.prefix_cache import embedded_window

    steps = [SimpleNamespace(num_prefix_queried_tokens=40, num_prefix_hit_tokens=30),
             SimpleNamespace(num_prefix_queried_tokens=0, num_prefix_hit_tokens=0)]
    window = embedded_window(steps, "on")
    assert window.hit_rate == 0.75 and window.source.startswith("engine step stats") and window.note is None
    assert embedded_window(steps[1:], "on").note == "no prefix-cache lookups in the window"
    off = embedded_window(steps, "off (option)")
    assert off.hit_rate is None and "off (option)" in off.note
