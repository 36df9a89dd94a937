"""Server text is arbitrary Unicode: a lone surrogate ("\\ud800", legal as a JSON escape, illegal in UTF-8) in a
streamed answer, a model name or a side answer is stored, printed and written to parquet as U+FFFD; a response no
check foresaw fails alone, and the sweep and the cell in flight go on."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from specbench.backends import server_text
from tests.support.asgi_thread import serve_in_thread
from tests.support.tiny_models import data_dir

LONE = "\ud800"


def _event(text: str, finish: str | None = None, model: str = "fake") -> str:
    body = {"id": "x", "object": "text_completion", "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n"  # json.dumps escapes the surrogate: "\ud800", as a hostile server may


def _app() -> Starlette:
    async def completions(request):
        async def events():
            for event in (_event(" a", model=f"fa{LONE}ke"), _event(LONE), _event(f" c{LONE}d"), _event("", "stop")):
                yield event
                await asyncio.sleep(0)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request):
        return JSONResponse({"data": [{"id": "fake"}]})

    async def version(request):  # a side answer with one too: it lands in the manifest
        return JSONResponse({"version": f"1.0{LONE}"})

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models),
                             Route("/version", version)])


def _sweep(url: str, results) -> tuple[int, str]:
    from specbench.cli.app import app

    args = ["sweep", "--backend", "openai", "--base-url", url, "--workload", "gsm8k", "--shots", "0", "--data-dir",
            str(data_dir()), "--max-tokens", "16", "--warmup", "0", "--results-dir", str(results), "--run-id", "u",
            "--limit", "2", "--concurrency", "1"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})
    return result.exit_code, result.output


def test_a_lone_surrogate_is_read_as_a_replacement_character(tmp_path):
    with serve_in_thread(_app()) as url:
        code, output = _sweep(url, tmp_path)
    assert code == 0, output
    rows = pd.read_parquet(tmp_path / "u" / "requests.parquet").to_dict("records")
    assert len(rows) == 2 and all(pd.isna(r["error"]) for r in rows), rows
    assert {r["output_text"] for r in rows} == {" a\ufffd c\ufffdd"}
    assert rows[0]["anomalies"][0] == "model_mismatch: asked 'fake', the response names 'fa\ufffdke'"
    manifest = (tmp_path / "u" / "manifest.json").read_text(encoding="utf-8")
    assert "\\ud800" not in manifest


def test_server_json_keeps_valid_pairs_and_replaces_lone_halves():
    assert server_text.loads('{"k\\udc00": ["\\ud83d\\ude00", "x\\ud800"]}') == {"k\ufffd": ["\U0001F600", "x\ufffd"]}
    assert server_text.loads(b'{"a": "plain"}') == {"a": "plain"}


def test_a_response_no_check_foresaw_fails_alone(tmp_path, monkeypatch):
    from specbench.backends import openai_backend

    checks = openai_backend.response_anomalies
    calls = []

    def first_breaks(state, asked, tokenizer=None):
        calls.append(1)
        if len(calls) == 1:
            raise UnicodeEncodeError("utf-8", LONE, 0, 1, "surrogates not allowed")
        return checks(state, asked, tokenizer)

    monkeypatch.setattr(openai_backend, "response_anomalies", first_breaks)
    with serve_in_thread(_app()) as url:
        code, output = _sweep(url, tmp_path)
    assert code == 0, output
    rows = pd.read_parquet(tmp_path / "u" / "requests.parquet").sort_values("request_index").to_dict("records")
    assert rows[0]["error"].startswith("unreadable: UnicodeEncodeError: 'utf-8' codec can't encode"), rows[0]
    assert pd.isna(rows[1]["error"]) and rows[1]["output_text"] == " a\ufffd c\ufffdd"
