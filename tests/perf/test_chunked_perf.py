"""The chunked-prefill benchmark harness (perf/chunked_perf.py, scripts/bench_gpu.py --suite chunked) at tiny
shapes on CPU: it runs off and on per k, the chunked runs mix chunks with the running requests' steps, and every
number it reports is filled in."""

from __future__ import annotations

from specbench import LLM
from specbench.perf.chunked_perf import MixedLoad, chunked_suite, chunked_table


def test_chunked_suite_runs_at_tiny_shapes(tmp_path):
    from specbench.models.presets import get_preset
    from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

    head = write_dummy_eagle3_head(get_preset("tiny-llama"), tmp_path / "head", draft_vocab_size=512)
    llm = LLM("tiny-llama", load_format="dummy", dtype="fp32", device="cpu", method="eagle3", draft=str(head),
              max_num_steps=2, synthetic_acceptance=(0.7, 0.5), max_concurrency=4, kv_cache_gb=0.05, block_size=4)
    load = MixedLoad(concurrency=2, prompt_len=8, output_len=24, long_prompt_len=40, num_long=1, long_output_len=4,
                     warmup_steps=3)
    sections = {}
    rows = chunked_suite(sections.__setitem__, llm, (load,), budget=12, num_steps=(0, 2))
    assert [(r.num_steps, r.is_chunked) for r in rows] == [(0, False), (0, True), (2, False), (2, True)]
    assert set(sections) == {"chunked_off_k0_c2", "chunked_on_k0_c2", "chunked_off_k2_c2", "chunked_on_k2_c2"}
    for row in rows:
        assert row.tpot_ms > 0 and row.itl_max_ms > 0 and row.ttft_mean_ms > 0
        # every chunked run prefills the whole long prompt in chunks: none is served from an earlier run's cache
        assert row.num_mixed_steps >= (load.long_prompt_len // 12 if row.is_chunked else 0)
    assert "chunked prefill on" in chunked_table(rows)
