"""scripts/bench_gpu.py's MoE suite on CPU: the floor arithmetic, the expert-count probe, the target table, and the
whole suite end to end on tiny MoE targets (engine + HF), rendered as BENCHMARKS.md rows. No timing asserts."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specbench import LLM
from specbench.perf import moe_targets
from specbench.perf.gpu_table import render
from specbench.perf.hf_baseline import build_hf_model, hf_gpt_oss_config, hf_qwen3_moe_config
from specbench.perf.moe_floor import ModelBytes, mean_decode_context, mean_step_bytes, model_bytes
from specbench.perf.moe_perf import MoeRun, moe_suite
from specbench.perf.moe_routing_probe import probe_active_experts
from specbench.perf.moe_targets import cut_layers, gpt_oss_20b_standin, resolve_target
from specbench.errors import SpecbenchError
from specbench.models.moe_config import MoeConfig
from specbench.models.presets import get_preset
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

BYTES = ModelBytes(dense_bytes=1000, embedding_row_bytes=10, expert_bytes=(100, 200), kv_bytes_per_token=2,
                   windows=(None, 4))


def test_mean_decode_context_clips_to_the_window():
    # prompt 8 -> 4 outputs: decode steps attend to 9, 10, 11 keys.
    assert mean_decode_context(8, 4, None) == 10.0
    assert mean_decode_context(8, 4, 4) == 4.0
    assert mean_decode_context(2, 4, 4) == pytest.approx((3 + 4 + 4) / 3)


def test_step_bytes_count_active_experts_rows_and_window_kv():
    decode = mean_step_bytes(BYTES, num_reqs=2, tokens_per_req=1, num_active_experts=[3.0, 1.5], prompt_len=8,
                             output_len=4)
    assert decode.dense == 1000 and decode.embedding == 2 * 10
    assert decode.experts == 3 * 100 + 1.5 * 200
    assert decode.kv == 2 * 2 * (10 + 4)  # 2 requests: the full layer's mean context 10, the window layer's 4
    assert decode.total == 1000 + 20 + 600 + 56
    assert decode.floor_ms(bandwidth_gbps=1e-6) == pytest.approx(decode.total)  # 1e3 B/s: one ms a byte
    verify = mean_step_bytes(BYTES, num_reqs=2, tokens_per_req=4, num_active_experts=[5.0, 2.0], prompt_len=8,
                             output_len=4)
    assert verify.embedding == 8 * 10 and verify.experts == 900
    assert verify.kv == 2 * 2 * (13 + 4)  # the verify's last query sees k = 3 more keys, the window still 4
    with pytest.raises(ValueError, match="2 MoE layers"):
        mean_step_bytes(BYTES, num_reqs=1, tokens_per_req=1, num_active_experts=[1.0], prompt_len=8, output_len=4)


def test_model_bytes_of_a_tiny_moe_target():
    llm = LLM("tiny-qwen3-moe", load_format="dummy", dtype="fp32", device="cpu", num_kv_blocks=64)
    model = llm.engine.runner.model
    config = get_preset("tiny-qwen3-moe")
    mb = model_bytes(model)
    per_expert = config.moe.num_params_per_expert() * 4
    assert mb.expert_bytes == (per_expert,)  # one MoE layer (layer 1)
    assert mb.embedding_row_bytes == config.hidden_size * 4  # untied
    total = sum(p.numel() * 4 for p in model.parameters())
    assert mb.dense_bytes == total - config.moe.num_experts * per_expert - config.vocab_size * config.hidden_size * 4
    assert mb.kv_bytes_per_token == 2 * config.num_key_value_heads * config.head_dim * 4
    assert mb.windows == (None, None)


def test_probe_counts_distinct_experts_of_decode_and_verify(tmp_path):
    head = write_dummy_eagle3_head(get_preset("tiny-qwen3-moe"), tmp_path / "head", draft_vocab_size=512)
    llm = LLM("tiny-qwen3-moe", load_format="dummy", dtype="fp32", device="cpu", method="eagle3", draft=str(head),
              max_num_steps=3, synthetic_acceptance=(0.7, 0.5, 0.3), max_concurrency=4, num_kv_blocks=256)
    k = get_preset("tiny-qwen3-moe").moe.num_experts_per_tok
    decode = probe_active_experts(llm, concurrency=4, num_steps=0, prompt_len=16, num_output_tokens=6)
    assert decode is not None and decode.num_tokens == 4 and decode.num_steps >= 4 and decode.num_experts == 8
    assert k <= decode.mean_active <= min(8, 4 * k)
    verify = probe_active_experts(llm, concurrency=2, num_steps=3, prompt_len=16, num_output_tokens=12)
    assert verify is not None and verify.num_tokens == 8
    assert k <= verify.mean_active <= 8
    assert llm.engine.runner.model.layers[1].mlp._forward_pre_hooks == {}  # the hooks are removed afterwards


def test_gpt_oss_standin_has_its_shapes_and_hf_twin():
    config = gpt_oss_20b_standin()
    assert config.num_hidden_layers == 24 and config.moe.num_experts == 32 and config.moe.num_experts_per_tok == 4
    assert 20e9 < config.num_params() < 22e9  # gpt-oss-20b: 20.9B parameters in bf16
    hf = hf_gpt_oss_config(config)
    assert (hf.hidden_size, hf.num_local_experts, hf.num_experts_per_tok, hf.sliding_window) == (2880, 32, 4, 128)
    assert hf.layer_types[:2] == ["sliding_attention", "full_attention"]
    cut = cut_layers(config, 4)
    assert cut.num_hidden_layers == 4 and cut.moe_layer_ids == (0, 1, 2, 3) and len(cut.attention_kinds) == 4
    qwen = hf_qwen3_moe_config(get_preset("qwen3-30b-a3b"))
    assert (qwen.num_experts, qwen.num_experts_per_tok, qwen.moe_intermediate_size, qwen.mlp_only_layers) == (
        128, 8, 768, [])
    with pytest.raises(SpecbenchError, match="supported: qwen3-30b-a3b, gpt-oss-20b"):
        resolve_target("mixtral")


def _tiny_gpt_oss():
    base = gpt_oss_20b_standin()
    moe = replace(base.moe, hidden_size=64, moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2)
    # 8 heads of 16: q wider than the hidden size, as gpt-oss-20b's (64 x 64 against 2880) and Qwen3-30B-A3B's.
    return replace(base, vocab_size=1024, hidden_size=64, intermediate_size=32, num_attention_heads=8,
                   num_key_value_heads=2, head_dim=16, bos_token_id=0, eos_token_ids=(2,), moe=moe,
                   num_hidden_layers=4, moe_layer_ids=(0, 1, 2, 3), attention_kinds=base.attention_kinds[:4],
                   max_position_embeddings=2048, checkpoint_dtype="float32")


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_suite_end_to_end_on_tiny_targets(tmp_path, monkeypatch):
    # Tiny stand-ins for the two targets: a Qwen3-MoE preset and a gpt-oss-shaped one (window 128 > the contexts
    # here, so an 8-key window is swapped in to clip the K/V count).
    from specbench.attention.kinds import FullAttention, SlidingWindowAttention

    gpt_oss = replace(_tiny_gpt_oss(), attention_kinds=tuple(
        SlidingWindowAttention(8) if i % 2 == 0 else FullAttention() for i in range(4)))
    monkeypatch.setattr(moe_targets, "_TARGETS", {
        "tiny-qwen3-moe": ("tiny-qwen3-moe", "qwen3_moe", None, ""),
        "tiny-gpt-oss": ("tiny-gpt-oss-absent", "gpt_oss", lambda: gpt_oss, "stand-in"),
    })
    sections: dict = {}
    run = MoeRun(concurrency=(1, 4), prompt_len=12, output_len=10, kv_cache_gb=None, max_model_len=256,
                 synthetic_acceptance=(0.7, 0.5, 0.3), hf_output_len=3, is_hf_skipped=False, device="cpu",
                 dtype="fp32", num_kv_blocks=256, probe_output_len=6)

    def head_dir_for(config):
        return write_dummy_eagle3_head(config, tmp_path / config.architecture, draft_vocab_size=512)

    moe_suite(sections.__setitem__, ["tiny-qwen3-moe", "tiny-gpt-oss"], run, 100.0, num_layers=None,
              head_dir_for=head_dir_for)
    assert not [k for k in sections if k.endswith("error")], {k: v for k, v in sections.items() if "error" in k}
    for target in ("tiny-qwen3-moe", "tiny-gpt-oss"):
        for row in ("plain_c1", "plain_c4", "eagle3_c1"):
            r = sections[f"moe:{target}:{row}"]
            assert r["floor_ms"] > 0 and r["pct_of_floor"] > 0 and r["experts"]["mean_active"] >= 2
        assert [r["batch_size"] for r in sections[f"moe:{target}:hf_static"]] == [1, 4]
    assert sections["moe:tiny-gpt-oss:build"]["windows"] == [8]
    assert sections["moe:tiny-gpt-oss:target"]["note"] == "stand-in"
    table = render({"device": "cpu", "torch": "x", "cuda": None, "date": "today",
                    "sections": {"copy_bandwidth_gbps": 100.0, **sections}})
    assert "| tiny-qwen3-moe | plain | 4 | off |" in table
    assert "| tiny-gpt-oss | eagle3 synthetic, k=3 | 1 |" in table
    assert "tiny-qwen3-moe plain c=1, % of floor" in table and "verify / decode time" in table


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_suite_on_cuda_with_graphs(tmp_path, monkeypatch):
    # What `bench_gpu.py --suite moe` runs, on tiny targets in bf16: CUDA graphs for the timed rows, the eager probe
    # pass in between (graphs paused, then replayed again), HF generate with a static cache on the GPU.
    gpt_oss = _tiny_gpt_oss()
    monkeypatch.setattr(moe_targets, "_TARGETS", {
        "tiny-qwen3-moe": ("tiny-qwen3-moe", "qwen3_moe", None, ""),
        "tiny-gpt-oss": ("tiny-gpt-oss-absent", "gpt_oss", lambda: gpt_oss, "stand-in"),
    })
    sections: dict = {}
    run = MoeRun(concurrency=(1, 16), prompt_len=12, output_len=24, kv_cache_gb=0.2, max_model_len=256,
                 synthetic_acceptance=(0.7, 0.5, 0.3), hf_output_len=4, is_hf_skipped=False, probe_output_len=8)

    def head_dir_for(config):
        return write_dummy_eagle3_head(config, tmp_path / config.architecture, draft_vocab_size=512)

    moe_suite(sections.__setitem__, ["tiny-qwen3-moe", "tiny-gpt-oss"], run, 1000.0, num_layers=None,
              head_dir_for=head_dir_for)
    assert not [k for k in sections if k.endswith("error")], {k: v for k, v in sections.items() if "error" in k}
    for target in ("tiny-qwen3-moe", "tiny-gpt-oss"):
        for row in ("plain_c1", "plain_c16", "eagle3_c1", "eagle3_c16"):
            r = sections[f"moe:{target}:{row}"]
            assert r["is_graphed"] and r["experts"]["num_steps"] > 0 and r["floor_ms"] > 0
        assert [r["batch_size"] for r in sections[f"moe:{target}:hf_static"]] == [1, 16]


def test_failed_target_leaves_an_error_row_and_the_next_runs(monkeypatch):
    monkeypatch.setattr(moe_targets, "_TARGETS", {
        "broken": ("no-such-preset", "qwen3_moe", None, ""),
        "also-broken": ("no-such-preset-2", "qwen3_moe", None, ""),
    })
    sections: dict = {}
    run = MoeRun(concurrency=(1,), prompt_len=8, output_len=4, kv_cache_gb=None, max_model_len=64,
                 synthetic_acceptance=(0.5,), hf_output_len=2, is_hf_skipped=True, device="cpu", dtype="fp32")
    moe_suite(sections.__setitem__, ["broken", "also-broken"], run, 1.0, num_layers=None, head_dir_for=None)
    assert set(sections) == {"moe:broken:error", "moe:also-broken:error"}
    assert "needs the model preset 'no-such-preset'" in sections["moe:broken:error"]


def test_tiny_gpt_oss_hf_twin_builds_and_generates():
    config = _tiny_gpt_oss()
    model = build_hf_model(config, device="cpu", dtype=torch.float32, model_type="gpt_oss")
    assert model.config.model_type == "gpt_oss" and model.config.num_local_experts == 8
    assert isinstance(config.moe, MoeConfig)
