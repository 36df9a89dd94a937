"""scripts/bench_moe_layer.py runs end to end (the tiny Qwen3-MoE preset on CPU, the kernels under the interpreter,
each graph timing replaced by one call per layer): a crash test for the script the H100 numbers come from, and its
old-vs-new numerics check."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_moe_layer.py"


@pytest.mark.slow
@pytest.mark.skipif(not kernels_runnable_here() or torch.cuda.is_available(), reason=RERUN_REASON)
def test_tiny_dry_run_prints_both_chains_and_each_kernel_group(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_moe_layer", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_moe_layer", bench)
    spec.loader.exec_module(bench)
    calls = []

    def once_per_layer(fn, num_calls):
        for i in range(num_calls):
            fn(i)
        calls.append(num_calls)
        return 1.0

    from specbench.models import decode_gemv

    fused_blocks = []
    real_block = decode_gemv.block
    monkeypatch.setattr(decode_gemv, "block", lambda layer, hidden, *a: fused_blocks.append(hidden.shape[0]) or
                        real_block(layer, hidden, *a))
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    monkeypatch.setattr(bench, "DTYPE", torch.float32)
    monkeypatch.setattr(bench, "graphed_ms", once_per_layer)
    monkeypatch.setattr(bench, "copy_bandwidth_gbps", lambda: 1000.0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "cpu")
    monkeypatch.setattr(sys, "argv", ["bench_moe_layer.py", "--presets", "tiny-qwen3-moe", "--tokens", "1,3",
                                      "--layers", "2", "--context", "20"])
    bench.main()
    out = capsys.readouterr().out
    for tokens in (1, 3):
        row = re.search(rf"\| {tokens} \| (\d+) \| \S+ \| 1000\.0 \| 1000\.0 \| 1\.00x \| \S+ \| (\S+) \|", out)
        assert row is not None, out
        assert float(row.group(2)) < 1e-4  # fp32: the old and new layers differ by summation order only
        for group in ("mask + router + top-k + sort", "qkv (+ bias)", "q/k norm + RoPE + K/V store",
                      "o_proj (+ bias) (new: + residual)"):
            assert f"| {tokens} | {group} | 1000.0 | 1000.0 |" in out, out
    assert set(calls) == {2}
    assert set(fused_blocks) == {1, 3}  # the new chain took the fused path (the old one never does)
