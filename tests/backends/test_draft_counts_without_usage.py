"""A response's draft counts are checked whether or not a usage block came (a proxy that ignores stream_options
sends none): negative counts stay fatal, and accepted tokens are bounded by what was asked and what streamed where
no usage says how many tokens were generated. No acceptance length is ever computed from a count a check refused."""

from __future__ import annotations

import asyncio
import itertools
import json

import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from specbench.backends.anomalies import Asked, draft_anomalies
from specbench.backends.request_draft import llamacpp_draft
from specbench.backends.stream_state import StreamState
from tests.support.asgi_thread import serve_in_thread
from tests.support.tiny_models import data_dir

MAX_TOKENS = 64
WORDS = (" a", " b", " c")
SPECS = {  # behaviour: vLLM's per-request counts, on the finish event; no usage anywhere
    "clean": {"num_spec_steps": 2, "num_draft_tokens": 4, "num_accepted_draft_tokens": 1},
    "negative": {"num_spec_steps": 2, "num_draft_tokens": -3, "num_accepted_draft_tokens": 3},
    "overaccepts": {"num_spec_steps": 2, "num_draft_tokens": 200, "num_accepted_draft_tokens": 150},
    "histogram": {"num_spec_steps": 6, "num_draft_tokens": 18, "num_accepted_draft_tokens": 9,
                  "acceptance_histogram": [5, -3, 4, 0]},  # the -3 hides in the tails: (1, 4, 0) per position
}


def _event(body: dict) -> str:
    return f"data: {json.dumps({'id': 'x', 'object': 'text_completion', 'model': 'fake', **body})}\n\n"


def _app(behaviours: tuple[str, ...]) -> Starlette:
    counter = itertools.count()
    served = [0]

    async def completions(request):
        spec = SPECS[behaviours[next(counter) % len(behaviours)]]
        served[0] += 1

        async def events():
            for word in WORDS:
                yield _event({"choices": [{"index": 0, "text": word, "finish_reason": None}]})
                await asyncio.sleep(0)
            yield _event({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}],
                          "metrics": {"speculative_decoding": spec}})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request):
        return JSONResponse({"data": [{"id": "fake"}]})

    async def metrics(request):  # one generated token counted per request: fewer than the 3 chunks of text each
        n = served[0]
        return PlainTextResponse(f"vllm:spec_decode_num_drafts_total {2 * n}\nvllm:generation_tokens_total {n}\n")

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models),
                             Route("/metrics", metrics)])


def test_draft_counts_without_usage_are_checked(tmp_path):
    from specbench.cli.app import app

    behaviours = tuple(SPECS)
    with serve_in_thread(_app(behaviours)) as url:
        args = ["sweep", "--backend", "openai", "--base-url", url, "--workload", "gsm8k", "--shots", "0",
                "--data-dir", str(data_dir()), "--max-tokens", str(MAX_TOKENS), "--warmup", "0", "--results-dir",
                str(tmp_path), "--run-id", "nousage", "--limit", str(len(behaviours)), "--concurrency", "1",
                "--server-adapter", "vllm"]
        result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"})
    assert result.exit_code == 0, result.output
    requests = pd.read_parquet(tmp_path / "nousage" / "requests.parquet").sort_values("request_index")
    (cell,) = pd.read_parquet(tmp_path / "nousage" / "cells.parquet").to_dict("records")
    # the counter check keeps a floor without usage: each successful response's 3 chunks of text
    num_ok = int(requests["error"].isna().sum())
    assert list(cell["window_anomalies"]) == [f"counter_mismatch: vllm counted {len(SPECS)} generated tokens in the "
                                              f"window, the responses report {3 * num_ok}"]
    rows = dict(zip(behaviours, requests.to_dict("records")))
    assert not any(r["is_usage_reported"] for r in rows.values())
    clean = rows["clean"]
    assert list(clean["anomalies"]) == [] and clean["acceptance_length"] == pytest.approx(1.5)
    negative = rows["negative"]
    assert negative["error"] == "negative_count: vllm:metrics.speculative_decoding draft tokens = -3"
    assert pd.isna(negative["acceptance_length"]) and pd.isna(negative["num_draft_tokens"])
    ceiling = MAX_TOKENS + 16  # max_tokens + OVER_MAX_TOKENS_SLACK (the text's bound, 10 x 7 + 16, is higher)
    assert list(rows["overaccepts"]["anomalies"]) == [
        f"draft_mismatch: vllm:metrics.speculative_decoding: 150 accepted draft tokens for {ceiling} completion "
        "tokens at most (no usage: max_tokens and text)"]
    assert list(rows["histogram"]["anomalies"]) == [
        "draft_mismatch: vllm:metrics.speculative_decoding: accepted per position [1, 4, 0] grows with the position"]


def _state(*events: dict) -> StreamState:
    state = StreamState()
    for n, event in enumerate(events):
        state.add_event(json.dumps(event), float(n))
    return state


def test_llamacpp_timings_without_usage_are_checked_against_the_text():
    text = [{"choices": [{"index": 0, "text": w, "finish_reason": None}]} for w in WORDS]
    for timings, expected in (({"draft_n": -3, "draft_n_accepted": 2}, "negative_count: llamacpp:timings draft "
                                                                         "tokens = -3"),
                              ({"draft_n": 60, "draft_n_accepted": 50}, "draft_mismatch: llamacpp:timings: 50 "
                                                                        "accepted draft tokens for 36 completion "
                                                                        "tokens at most (no usage: max_tokens and "
                                                                        "text)")):
        final = {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}], "timings": timings}
        state = _state(*text, final)
        assert state.completion_tokens is None  # bound: min(max_tokens 20 + 16, 10 x (6 bytes + 1) + 16) = 36
        found = draft_anomalies(llamacpp_draft(state.server_fields), state, Asked("fake", 20, 10, False))
        assert [str(a) for a in found] == [expected]
    # under ignore_eos the text bounds nothing: max_tokens + slack does
    state = _state(*text, {"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                           "timings": {"draft_n": 60, "draft_n_accepted": 50}})
    assert draft_anomalies(llamacpp_draft(state.server_fields), state, Asked("fake", 200, 10, True)) == ()
