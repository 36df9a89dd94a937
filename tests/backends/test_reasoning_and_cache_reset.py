"""Over HTTP: reasoning deltas (`reasoning_content` / `reasoning`) count as output for TTFT and ITL, are stored
apart from the answer, and GSM8K scores the answer only; the prefix cache is reset before every cell through the
endpoint the server offers (vLLM /reset_prefix_cache, SGLang /flush_cache) and the cell records it."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from tests.support.asgi_thread import serve_in_thread
from specbench.backends.reasoning import split_delta
from specbench.backends.stream_state import StreamState
from tests.support.tiny_models import data_dir

GAP_S = 0.05
REASONING = ["Let me think.", " Guess #### 5?", " No: 16 - 3 - 4 = 9, 9 * 2 = 18."]
ANSWER = ["The answer", " is #### 18"]  # GSM8K test question 0 (Janet's ducks): gold 18


def _event(delta: dict, finish: str | None = None, tokens: int | None = None) -> str:
    body = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                                       "finish_reason": finish}]}
    if tokens is not None:
        body["usage"] = {"prompt_tokens": 20, "completion_tokens": tokens}
    return f"data: {json.dumps(body)}\n\n"


def reasoning_app(reset_path: str | None, reset_calls: list[str], reasoning_key: str) -> Starlette:
    async def chat(request: Request):
        async def events():
            yield _event({"role": "assistant"}, tokens=0)
            tokens = 0
            for text in REASONING:
                await asyncio.sleep(GAP_S)
                tokens += 2
                yield _event({reasoning_key: text}, tokens=tokens)
            for i, text in enumerate(ANSWER):
                await asyncio.sleep(GAP_S)
                tokens += 3
                yield _event({"content": text}, "stop" if i == len(ANSWER) - 1 else None, tokens=tokens)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request: Request):
        return JSONResponse({"data": [{"id": "thinker"}]})

    async def reset(request: Request):
        reset_calls.append(request.url.path)
        return JSONResponse({})

    routes = [Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)]
    if reset_path is not None:
        routes.append(Route(reset_path, reset, methods=["POST"]))
    return Starlette(routes=routes)


def _sweep(url: str, results, run_id: str, *extra: str) -> str:
    from specbench.cli.app import app

    args = ["sweep", "--backend", "openai", "--base-url", url, "--workload", "gsm8k", "--shots", "0", "--limit", "1",
            "--data-dir", str(data_dir()), "--chat-template", "--concurrency", "1,2", "--warmup", "1",
            "--results-dir", str(results), "--run-id", run_id, "--quiet", *extra]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_split_delta_reads_both_reasoning_names():
    assert split_delta({"delta": {"reasoning_content": "r"}}).reasoning == "r"
    assert split_delta({"delta": {"reasoning": "r", "content": None}}) == split_delta({"delta": {"reasoning": "r"}})
    assert split_delta({"delta": {"content": "a"}}).answer == "a" and split_delta({"text": "t"}).answer == "t"
    state = StreamState()
    state.add_event(json.dumps({"choices": [{"delta": {"reasoning_content": "why"}}]}), 1.0)
    state.add_event(json.dumps({"choices": [{"delta": {"content": "what"}}]}), 2.0)
    assert (state.reasoning_text, state.text) == ("why", "what")
    assert [c.time for c in state.content_chunks] == [1.0, 2.0]


@pytest.mark.parametrize(("reset_path", "reasoning_key"), [("/reset_prefix_cache", "reasoning_content"),
                                                          ("/flush_cache", "reasoning")])
def test_reasoning_counts_for_latency_and_is_kept_apart_from_the_scored_answer(tmp_path, reset_path, reasoning_key):
    calls: list[str] = []
    with serve_in_thread(reasoning_app(reset_path, calls, reasoning_key)) as url:
        output = _sweep(url, tmp_path, "r")
    requests = pd.read_parquet(tmp_path / "r" / "requests.parquet")
    assert len(requests) == 2 and requests["error"].isna().all()
    for _, row in requests.iterrows():
        assert row["reasoning_text"] == "".join(REASONING) and row["output_text"] == "".join(ANSWER)
        assert row["num_emissions"] == len(REASONING) + len(ANSWER)  # reasoning chunks are emissions too
        assert row["num_output_tokens"] == 2 * len(REASONING) + 3 * len(ANSWER)
        # TTFT is the first reasoning delta, not the answer: the first of the emissions (reasoning ones included).
        # Only lower bounds on wall time (the server's sleeps guarantee them; a loaded box only adds delay).
        times = list(row["emission_times"])
        assert times == sorted(times) and row["ttft_s"] == pytest.approx(times[0] - row["arrival_time"])
        assert row["ttft_s"] >= GAP_S * 0.8 and times[-1] - row["arrival_time"] >= GAP_S * 0.8 * len(times)
        assert row["strict_answer"] == "18" and row["is_strict_match"]  # the answer is scored, not the reasoning
    cells = pd.read_parquet(tmp_path / "r" / "cells.parquet")
    assert cells["is_cache_reset"].all() and (cells["cache_reset_note"] == f"POST {reset_path}").all()
    assert calls == [reset_path, reset_path]  # once before each cell (its warmup included)
    assert f"prefix cache reset before each cell (POST {reset_path})" in output


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_no_reset_endpoint_and_no_cache_reset_are_recorded(tmp_path):
    calls: list[str] = []
    with serve_in_thread(reasoning_app(None, calls, "reasoning_content")) as url:
        output = _sweep(url, tmp_path, "none")
        _sweep(url, tmp_path, "skip", "--no-cache-reset")
    cells = pd.read_parquet(tmp_path / "none" / "cells.parquet")
    assert not cells["is_cache_reset"].any()
    assert cells["cache_reset_note"].str.startswith("the server offers no prefix-cache reset").all()
    assert "prefix cache not reset: the server offers no prefix-cache reset" in output
    skipped = pd.read_parquet(tmp_path / "skip" / "cells.parquet")
    assert (skipped["cache_reset_note"] == "skipped (--no-cache-reset)").all() and not calls
