"""scripts/bench_moe.py runs end to end (tiny shapes on CPU, the fused path under the interpreter): a crash test for
the script the H100 numbers come from."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_moe.py"


def _load_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_moe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_moe", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
def test_tiny_run_prints_both_paths_and_agreeing_numerics(monkeypatch, capsys):
    bench = _load_script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["bench_moe.py", "--tiny", "--layers", "1", "--tokens", "1,3"])
    bench.main()
    out = capsys.readouterr().out
    for shape in bench.TINY:
        diff = re.search(rf"{shape}: fused vs reference, max \|diff\| / max \|ref\| = (\S+)", out)
        assert diff is not None and float(diff.group(1)) < 1e-5, out
        for tokens in (1, 3):
            for path in ("torch reference", "fused (Triton)"):
                row = re.search(rf"\| {shape} \| {tokens} \| {re.escape(path)} \| (\S+) \| (\S+) \|", out)
                assert row is not None, out
                num_active, mb_read = float(row.group(1)), float(row.group(2))
                assert 2 <= num_active <= 2 * tokens and mb_read > 0


@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
def test_tiny_sweep_ranks_tiles(monkeypatch, capsys):
    bench = _load_script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["bench_moe.py", "--tiny", "--layers", "1", "--tokens", "3", "--sweep",
                                      "--shapes", "tiny-gpt-oss"])
    bench.main()
    out = capsys.readouterr().out
    assert "tiny-qwen3" not in out
    experts_rows = re.findall(r"\| tiny-gpt-oss \| 3 \| experts, (default: )?m\d+, gate_up n\d+", out)
    assert 3 <= len(experts_rows) <= 4 and sum(1 for d in experts_rows if d) == 1, out


def test_unknown_shape_is_one_error_line(monkeypatch, capsys):
    bench = _load_script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["bench_moe.py", "--shapes", "qwen3-30b-a3b,llama"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    assert "unknown shape 'llama'; supported: qwen3-30b-a3b, gpt-oss-20b" in capsys.readouterr().err
