"""The whole chain over HTTP: `specbench serve --inject corrupt-at-batch-8` (draft, k = 3, fp32 CPU) passes the
gentle gate against a reference recorded from a clean server, and `specbench stress --base-url` (against a
speculation-off server, --baseline-url) fails it at concurrency 8 and passes it at 1."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.gate.conftest import gate_pair, run_gate_cli  # noqa: F401
from tests.stress.test_stress_faults import _verdicts
from tests.support.tiny_models import data_dir

pytestmark = pytest.mark.slow


def _server(pair, inject: str | None = None, method: str = "draft", k: int = 3):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(pair.target), method=method, draft=str(pair.draft) if method == "draft" else None,
                          device="cpu", kv_cache_gb=0.05, max_num_steps=k if method != "none" else 0)
    return start_server(ServeConfig(engine, served_model_name="tiny"), fault=injection(inject))


def _stress_cli(args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    from tests.support.cli_run import run_main

    result = run_main("stress", *args)
    return result.exit_code, result.stdout


def test_a_condition_fault_passes_the_gate_and_fails_stress_over_http(gate_pair, tmp_path, monkeypatch, capsys):
    gate_args = ["-k", "3", "--data-dir", str(data_dir()), "--num-prompts", "4", "--shots", "1", "--max-tokens", "12",
                 "--results-dir", str(tmp_path / "results")]
    ref = tmp_path / "ref.json"
    with _server(gate_pair) as clean, _server(gate_pair, method="none") as plain:
        code, out, err = run_gate_cli(["--base-url", clean.url, *gate_args, "--write-reference", str(ref)],
                                      monkeypatch, capsys)
        assert code == 0, out + err
        stress = ["--base-url", clean.url, "--baseline-url", plain.url, "-k", "3", "--rule", "output", "--quiet",
                  "--num-requests", "4", "--max-tokens", "12", "--conditions", "gentle,concurrency-8"]
        code, out = _stress_cli(stress, monkeypatch, capsys)
        assert code == 0 and out.startswith("## specbench stress: PASS"), out  # no false alarm over HTTP
        with _server(gate_pair, inject="corrupt-at-batch-8") as faulty:
            code, out, err = run_gate_cli(["--base-url", faulty.url, *gate_args, "--reference", str(ref)],
                                          monkeypatch, capsys)
            assert code == 0 and out.startswith("## specbench gate: PASS"), out + err  # the gentle gate misses it
            stress[1] = faulty.url
            code, out = _stress_cli(stress, monkeypatch, capsys)
    assert code == 1, out
    assert out.splitlines()[0] == ("## specbench stress: FAIL: FAIL at concurrency-8 (concurrency 8, prompts of 96 "
                                   "tokens); passes at gentle (concurrency 1, prompts of 96 tokens)"), out
    assert _verdicts(out) == {"gentle": "PASS", "concurrency-8": "FAIL"}
