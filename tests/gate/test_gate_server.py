"""`specbench gate --base-url` against an in-process `specbench serve` (draft, k = 2): a clean server passes against
a reference recorded from it; a server built with an injected verifier fault fails lossless against that reference."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.gate.conftest import run_gate_cli
from tests.support.tiny_models import data_dir


def _server(pair, inject: str | None = None, method: str = "draft", k: int = 2):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(pair.target), method=method, draft=str(pair.draft) if method == "draft" else None,
                          device="cpu", kv_cache_gb=0.05, max_num_steps=k)
    return start_server(ServeConfig(engine, served_model_name="tiny"), fault=injection(inject))


def _args(url: str, tmp_path, k: int = 2) -> list[str]:
    return ["--base-url", url, "-k", str(k), "--data-dir", str(data_dir()), "--num-prompts", "4", "--shots", "1",
            "--max-tokens", "12", "--results-dir", str(tmp_path / "results")]


def _status(out: str, stage: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"| {stage} |")).split(" | ")[1]


@pytest.mark.slow
def test_a_clean_server_passes_and_a_faulty_one_fails_lossless(gate_pair, tmp_path, monkeypatch, capsys):
    ref = tmp_path / "ref.json"
    with _server(gate_pair) as clean:
        code, out, err = run_gate_cli([*_args(clean.url, tmp_path), "--write-reference", str(ref)], monkeypatch,
                                      capsys)
        assert code == 0, out + err
        assert "k=2 server (no k = 0 run)" in ref.read_text()
        code, out, err = run_gate_cli([*_args(clean.url, tmp_path), "--reference", str(ref)], monkeypatch, capsys)
    assert code == 0, out + err
    assert _status(out, "lossless") == "PASS" and "reference file, k=2 server" in out
    assert _status(out, "outputs") == "PASS" and _status(out, "speed") == "N/A"
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    with _server(gate_pair, inject="verify-kv-off-by-one") as faulty:
        code, out, err = run_gate_cli([*_args(faulty.url, tmp_path), "--reference", str(ref)], monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (lossless") and _status(out, "lossless") == "FAIL"
    # The probe asks the server for logprobs (serve computes them from the target): each mismatch is classified by
    # the target's top-2 margin there, and the fault's are far from ties.
    assert "[divergent, margin " in out and "[unclassified: " not in out
    # the outputs differ from the baseline: acceptance (from the server's /metrics counters) is not comparable
    assert _status(out, "acceptance") == "N/A" and "not comparable: outputs differ" in out


def test_a_server_that_does_not_speculate_fails_the_gate(gate_pair, tmp_path, monkeypatch, capsys):
    """Issue 40: `specbench serve` with method none (its /version: num_steps 0) gated with -k 3 against a reference
    from a k = 3 n-gram server passed (acceptance N/A, speed "improved"); the gate must say speculation is off."""
    ref = tmp_path / "ref.json"
    with _server(gate_pair, method="ngram", k=3) as ngram:
        code, out, err = run_gate_cli([*_args(ngram.url, tmp_path, 3), "--write-reference", str(ref)], monkeypatch,
                                      capsys)
    assert code == 0, out + err
    with _server(gate_pair, method="none", k=0) as plain:
        code, out, err = run_gate_cli([*_args(plain.url, tmp_path, 3), "--reference", str(ref)], monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (") and _status(out, "acceptance") == "FAIL"
    row = next(line for line in out.splitlines() if line.startswith("| acceptance |"))
    assert "speculation off?" in row and "num_steps 0" in row and "-k 3" in row
