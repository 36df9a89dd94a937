"""The GPU benchmark's measurement and table code, run on CPU with a tiny dummy target and EAGLE-3 head."""

from __future__ import annotations

from specbench import LLM
from specbench.perf.gpu_perf import GraphsOff, measure_decode
from specbench.perf.gpu_table import render
from specbench.models.presets import get_preset
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head


def test_measure_decode_and_table(tmp_path):
    head = write_dummy_eagle3_head(get_preset("tiny-llama"), tmp_path / "head", draft_vocab_size=512)
    llm = LLM("tiny-llama", load_format="dummy", dtype="fp32", device="cpu", method="eagle3", draft=str(head),
              max_num_steps=3, synthetic_acceptance=(0.73, 0.52, 0.35), max_concurrency=4, num_kv_blocks=256)
    common = dict(prompt_len=16, output_len=48, bandwidth_gbps=100.0)
    plain = measure_decode(llm, label="plain", concurrency=4, num_steps=0, **common)
    eagle = measure_decode(llm, label="eagle3 synthetic", concurrency=4, num_steps=3, **common)
    assert plain.tokens_per_step == 1.0 and plain.draft_ms == 0.0 and not plain.is_graphed
    # Forced 0.73/0.52/0.35: 1 + 1.60 tokens per round in expectation; 4 x ~12 rounds is a small sample.
    assert 2.0 < eagle.tokens_per_step < 3.2
    assert eagle.draft_ms > 0 and eagle.step_ms > 0 and eagle.floor_ms > 0
    with GraphsOff(llm.engine):
        assert llm.engine.runner.graphs is None
    proposer, fake = llm.engine.proposer, object()  # captured step graphs (CPU: none, so a stand-in)
    proposer.draft_graphs.steps = fake
    with GraphsOff(llm.engine):
        assert proposer.draft_graphs.steps is None
    assert proposer.draft_graphs.steps is fake
    data = {"device": "cpu", "torch": "x", "cuda": None, "sections": {
        "copy_bandwidth_gbps": 100.0, "plain_c1": plain.to_dict(), "eagle3_c1": eagle.to_dict()}}
    table = render(data)
    assert "| plain | 4 | off |" in table and "verify (4 query tokens)" in table and "EAGLE-3 synthetic" in table
