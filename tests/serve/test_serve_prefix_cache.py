"""`specbench serve` exports its engine's prefix-cache counters on /metrics, under its namespace with vLLM's names, and
the sweep's reader (backends/prefix_cache.py) turns two scrapes into the window's hit rate; POST /reset_prefix_cache
empties the cache."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

PROMPT = {"prompt": "Question: what is the sum of the first ten odd numbers, and why is it a square?\nAnswer:",
          "max_tokens": 4, "ignore_eos": True, "temperature": 0}


def test_repeated_prompt_hits_and_the_sweep_reads_the_rate(tiny_model_dir):
    from specbench.backends.prefix_cache import prefix_cache_window, read_prefix_cache
    from specbench.backends.prometheus import parse_metrics
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    config = EngineConfig(target=str(tiny_model_dir), device="cpu", kv_cache_gb=0.02, block_size=4,
                          max_model_len=256)
    with start_server(ServeConfig(config, served_model_name="tiny")) as running:
        before = read_prefix_cache(parse_metrics(httpx.get(running.url + "/metrics").text))
        answers = [httpx.post(running.url + "/v1/completions", json=PROMPT, timeout=60) for _ in range(2)]
        assert [a.status_code for a in answers] == [200, 200]
        text = httpx.get(running.url + "/metrics").text
        # the sweep's cache reset before a cell (vLLM's endpoint): the same prompt then misses
        reset = httpx.post(running.url + "/reset_prefix_cache", timeout=30)
        assert reset.status_code == 200 and reset.json()["num_blocks_forgotten"] > 0
        assert httpx.post(running.url + "/v1/completions", json=PROMPT, timeout=60).status_code == 200
        after_reset = read_prefix_cache(parse_metrics(httpx.get(running.url + "/metrics").text))
    assert "# TYPE specbench:prefix_cache_hits counter" in text
    after = read_prefix_cache(parse_metrics(text))
    assert after.source == "specbench:prefix_cache_hits/queries"
    assert 0 < after.num_hits < after.num_queries  # the second prompt reused all but its last block
    window = prefix_cache_window(before, after)
    assert window.note is None and 0 < window.hit_rate < 1
    assert after_reset.num_hits == after.num_hits and after_reset.num_queries > after.num_queries
    # per request, as vLLM and SGLang report it: the second answer's cached prompt tokens are the window's hits
    cached = [a.json()["usage"]["prompt_tokens_details"]["cached_tokens"] for a in answers]
    assert cached == [0, after.num_hits - before.num_hits]
