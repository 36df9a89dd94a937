"""scripts/bench_moe.py runs end to end (tiny shapes on CPU, the fused path under the interpreter): a crash test for
the script the H100 numbers come from."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_moe.py"


def _load_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_moe", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_moe", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
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


def test_unknown_shape_is_one_error_line(monkeypatch, capsys):
    bench = _load_script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["bench_moe.py", "--shapes", "qwen3-30b-a3b,llama"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    assert "unknown shape 'llama'; supported: qwen3-30b-a3b, gpt-oss-20b" in capsys.readouterr().err


KERNELS_SCRIPT = SCRIPT.parent / "bench_moe_kernels.py"


def _load_kernels_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_moe_kernels", KERNELS_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_moe_kernels", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)
def test_kernels_bench_tiny_times_every_candidate_and_prints_tuned_lines(monkeypatch, capsys):
    # Two candidates a kind (the interpreter is slow), one CUDA-core one past one token: at 1 and 2 tokens, every
    # kernel (one-token and grouped, CUDA cores and tensor cores) runs.
    bench = _load_kernels_script(monkeypatch)
    for name in ("CORE_GATE_UP", "CORE_DOWN", "DOT_GATE_UP", "DOT_DOWN"):
        monkeypatch.setattr(bench, name, getattr(bench, name)[:2])
    monkeypatch.setattr(bench, "CORES_PAST_ONE", 1)
    monkeypatch.setattr(sys, "argv", ["bench_moe_kernels.py", "--tiny", "--layers", "1", "--tokens", "1,2",
                                      "--shapes", "tiny-gpt-oss"])
    bench.main()
    out = capsys.readouterr().out
    assert "tiny-qwen3" not in out and "MISMATCH" not in out and "failed" not in out, out
    for tokens, num_candidates in ((1, 4), (2, 3)):
        for part, count in (("gate_up", num_candidates), ("down", num_candidates), ("experts", 2)):
            assert len(re.findall(rf"\| tiny-gpt-oss \| {tokens} \| {part} \|", out)) == count, out
        summary = rf"^\| tiny-gpt-oss \| {tokens} \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$"
        assert re.search(summary, out, re.MULTILINE), out
    from specbench.kernels.moe_tiles import ExpertTiles, ProjectionTiles

    for bucket, tokens in ((1, 1), (4, 2)):
        tuned = re.search(rf"^    \(64, 64, {bucket}\): (ExpertTiles\(.*\)),  # {tokens} tokens: ", out, re.MULTILINE)
        assert tuned is not None, out
        tiles = eval(tuned.group(1), {"ExpertTiles": ExpertTiles, "ProjectionTiles": ProjectionTiles})  # pasteable
        assert tiles.gate_up in bench.CORE_GATE_UP + bench.DOT_GATE_UP
        assert tiles.down in bench.CORE_DOWN + bench.DOT_DOWN
