"""scripts/bench_hybrid.py on CPU (--tiny: a tiny random Qwen3-Next, every row and the table), the hybrid floor's
arithmetic by hand, the qwen3-next-80b-a3b preset against transformers' Qwen3NextConfig defaults (the 80B's), and
the layer cut."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from specbench.attention import create_backend
from specbench.errors import SpecbenchError
from specbench.models.llama import DecoderLM
from specbench.models.presets import get_preset
from specbench.perf.hybrid_floor import expected_distinct_experts, state_bytes_per_step
from specbench.perf.moe_floor import model_bytes
from specbench.recurrent.state_shape import StateShape

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_hybrid.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_hybrid", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_state_bytes_by_hand():
    # Qwen3-Next-80B's Gated DeltaNet shape, 9 layers (the 12-layer cut): recurrent 32 x 128 x 128 fp32 = 2 MiB,
    # conv (2 * 16 * 128 + 32 * 128) = 8192 channels x 3 bf16 = 48 KiB; read once + written once.
    shape = StateShape(num_layers=9, conv_channels=8192, conv_width=3, recurrent_dims=(32, 128, 128))
    per_layer = 32 * 128 * 128 * 4 + 8192 * 3 * 2
    assert per_layer == 2_146_304
    assert state_bytes_per_step(shape, torch.bfloat16, 1) == 2 * 9 * per_layer == 38_633_472
    assert state_bytes_per_step(shape, torch.bfloat16, 16) == 16 * 38_633_472
    assert state_bytes_per_step(shape, torch.float32, 1) == 2 * 9 * (32 * 128 * 128 * 4 + 8192 * 3 * 4)


def test_expected_experts_by_hand():
    assert expected_distinct_experts(512, 10, 1) == pytest.approx(10.0)
    assert expected_distinct_experts(8, 2, 2) == pytest.approx(8 * (1 - 0.75 ** 2))  # 3.5
    assert 130 < expected_distinct_experts(512, 10, 16) < 16 * 10


def test_preset_matches_transformers_defaults_and_cuts():
    from transformers import Qwen3NextConfig

    hf, c = Qwen3NextConfig(), get_preset("qwen3-next-80b-a3b")
    g, moe = c.gated_delta_net, c.moe
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
            c.head_dim) == (hf.vocab_size, hf.hidden_size, hf.num_hidden_layers, hf.num_attention_heads,
                            hf.num_key_value_heads, hf.head_dim)
    assert (g.num_k_heads, g.num_v_heads, g.k_dim, g.v_dim, g.conv_kernel_size) == (
        hf.linear_num_key_heads, hf.linear_num_value_heads, hf.linear_key_head_dim, hf.linear_value_head_dim,
        hf.linear_conv_kernel_dim)
    assert (moe.num_experts, moe.num_experts_per_tok, moe.moe_intermediate_size, moe.shared_intermediate_size,
            moe.norm_topk_prob) == (hf.num_experts, hf.num_experts_per_tok, hf.moe_intermediate_size,
                                    hf.shared_expert_intermediate_size, hf.norm_topk_prob)
    assert [k.name == "gated_delta_net" for k in c.attention_kinds] == [t == "linear_attention" for t in hf.layer_types]
    assert c.partial_rotary_dim == 64 and c.moe_layer_ids == tuple(range(48)) and c.num_mtp_modules == 1
    assert 79e9 < c.num_params() < 81e9  # "80B total"
    bench = load_script()
    name, note = bench.cut_preset("qwen3-next-80b-a3b", 12)
    cut = get_preset(name)
    assert (cut.num_hidden_layers, cut.num_kv_layers, len(cut.moe_layer_ids)) == (12, 3, 12) and "12 of 48" in note
    model = DecoderLM(cut, create_backend("torch"), torch.bfloat16, "meta")
    mb = model_bytes(model)
    assert mb.windows == (None, None, None)  # K/V of the 3 attention layers only, none for the 9 DeltaNet layers
    assert mb.kv_bytes_per_token == 2 * 2 * 256 * 2  # K and V, 2 heads of 256, bf16
    with pytest.raises(SpecbenchError, match="multiple of 4"):
        bench.cut_preset("qwen3-next-80b-a3b", 10)


@pytest.mark.slow  # ~4-9 s on 2 busy cores: the -m 'not slow' subset stays under 5 min
def test_tiny_run_end_to_end(tmp_path):
    bench = load_script()
    data = bench.main(["--tiny", "--concurrency", "1,4", "--out", str(tmp_path), "--eager-rows"])
    assert data["errors"] == {}
    rows = data["rows"]
    keys = ["mtp:plain_c1", "mtp:plain_c4", "mtp:k1_c1", "mtp:k2_c1", "mtp:k3_c1", "eagle3:plain_c1", "eagle3:k3_c1",
            "mtp-eager:plain_c1", "mtp-eager:plain_c4", "mtp-eager:k3_c1"]
    for key in keys:
        row = rows[key]
        assert row["step_ms"] > 0 and row["floor_ms"] > 0 and row["bytes"]["state_gb"] > 0
        assert row["bytes"]["experts_source"] == "routing probe"
    # state read + written grows with the requests; the woken experts at least top-k
    assert rows["mtp:plain_c4"]["bytes"]["state_gb"] == pytest.approx(4 * rows["mtp:plain_c1"]["bytes"]["state_gb"])
    assert rows["mtp:plain_c1"]["bytes"]["experts_per_layer"] == 2.0
    assert rows["mtp:k3_c1"]["tokens_per_step"] > 1
    md = (tmp_path / "bench.md").read_text()
    assert json.loads((tmp_path / "bench.json").read_text())["rows"].keys() == rows.keys()
    for key in keys:
        line = next(line for line in md.splitlines() if line.startswith(f"| {key} (all 4 layers) |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert all(re.match(r"^[0-9.]+", c) for c in cells[1:6]), line
        if ":k" in key:
            assert re.match(r"^[0-9.]+x$", cells[6]), line
    assert "verify (k + 1 = 4 tokens, c = 1) / decode" in md and "FAILED" not in md
    assert "CUDA graphs vs eager (step ms): plain_c1 " in md and "mtp-eager off: enforce_eager" in md


def test_no_method_is_one_clear_error(capsys):
    # Every section times the plain rows first: an empty --methods would write an empty table (session 23 did).
    with pytest.raises(SystemExit) as exc:
        load_script().parse_args(["--methods", "", "--tiny"])
    assert exc.value.code == 2 and "--methods needs at least one of mtp, eagle3" in capsys.readouterr().err
