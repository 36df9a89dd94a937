"""scripts/bench_moe_before_after.py's flow on CPU: one tiny MoE target, both kernel sets on one engine, every row
written and the table rendered (the "auto" policy keeps the torch paths on CPU: no timing, no kernels)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_moe_before_after.py"


def load_script():
    spec = importlib.util.spec_from_file_location("bench_moe_before_after", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_rows_and_table_for_both_sets(tmp_path):
    bench = load_script()
    args = argparse.Namespace(concurrency=[1, 2], verify_concurrency=[1], prompt_len=16, output_len=6, probe_len=4,
                              prefill_len=40, peak_tflops=1.0, kernel_tokens=[4], kv_cache_gb=None, max_model_len=128,
                              sets=["gemv", "grouped"])
    out = bench.Out(tmp_path / "out", "cpu")
    bench.target_rows(out, "tiny", "tiny-qwen3-moe", args, 1.0, tmp_path, device="cpu", dtype="fp32",
                      num_kv_blocks=256, draft_vocab_size=512)
    rows = out.data["rows"]
    for kernel_set in ("gemv", "grouped"):
        assert {f"tiny:{kernel_set}:{row}" for row in ("plain_c1", "plain_c2", "eagle3_c1", "prefill")} <= set(rows)
        prefill = rows[f"tiny:{kernel_set}:prefill"]
        assert prefill["bound_ms"] == max(prefill["compute_ms"], prefill["bytes_ms"]) > 0
    md = bench.table(out.data, ["tiny"], ["gemv", "grouped"], [1, 2], [1])
    assert md.count("\n| tiny | ") == 2 and "x time for" in md and "-" not in md.split("\n")[2].split("|")[3]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["bench.json"]
    out.data["rows"]["copy_bandwidth_gbps"] = 1000.0
    out.data["rows"]["tiny:experts_n4"] = {"num_tokens": 4, "mean_active_experts": 6.0, "gb_per_layer": 0.01,
                                         "gemv_us": 20.0, "grouped_us": 15.0, "best_down": "2x1",
                                         "best_grouped_us": 15.0}
    kernel_md = bench.table(out.data, ["tiny"], ["gemv", "grouped"], [1, 2], [1]).split("Routed experts alone")[1]
    assert "| tiny | 4 | 6.0 | 10.0 | 20.0 (50%) | 15.0 (67%) | 2x1: 15.0 (67%) |" in kernel_md
