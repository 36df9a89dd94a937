"""The GPU benchmark's prefix rows (perf/prefix_perf.py, scripts/bench_gpu.py --suite prefix) on CPU with a tiny dummy
target and EAGLE-3 head: both engines run the same turns, only the caching one hits, hits and misses draft at the same
forced rate, and the table renders."""

from __future__ import annotations

from specbench import LLM
from specbench.models.presets import get_preset
from specbench.perf.gpu_table import render
from specbench.perf.prefix_perf import PrefixWorkload, prefix_suite, render_prefix
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

SYNTHETIC = (0.73, 0.52, 0.35)


def test_prefix_suite_on_tiny_shapes(tmp_path):
    head = write_dummy_eagle3_head(get_preset("tiny-llama"), tmp_path / "head", draft_vocab_size=512)

    def build(is_on: bool) -> LLM:
        return LLM("tiny-llama", load_format="dummy", dtype="fp32", device="cpu", method="eagle3", draft=str(head),
                   max_num_steps=3, synthetic_acceptance=SYNTHETIC, max_concurrency=4, num_kv_blocks=256,
                   block_size=8, enable_prefix_caching=is_on)

    workload = PrefixWorkload(num_conversations=3, num_turns=2, system_len=40, user_len=6, output_len=6,
                              vocab_size=500)
    sections: dict = {}
    off, on = prefix_suite(sections.__setitem__, build, workload, num_steps=3,
                           warmup=PrefixWorkload(2, 1, 8, 4, 3, 500, seed=1))
    assert (off.prefix_caching, on.prefix_caching) == (False, True)
    assert off.num_requests == on.num_requests == 6
    assert off.hit_rate is None and 0.3 < on.hit_rate < 1  # turn 1 hits the system prompt, turn 2 the history
    assert on.acceptance_length_hit is not None and on.acceptance_length_miss is not None
    assert off.acceptance_length_hit is None and off.acceptance_length_miss > 1
    table = "\n".join(render_prefix(sections))
    assert "prefix caching on, k=3" in table and "TTFT" in table
    data = {"sections": sections, "device": "cpu", "torch": "x", "cuda": None}
    assert "prefix caching off, k=3" in render(data)
