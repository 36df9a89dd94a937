"""check-lossless near-tie diagnosis: at the first divergent token the reference server's top-2 logprob margin
classifies a mismatch as near-tie or divergent; only divergent ones fail unless --strict."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from tests.support.asgi_thread import serve_in_thread
from specbench.backends.near_tie import DIVERGENT, NEAR_TIE, UNCLASSIFIED, classify, parse_logprobs
from tests.support.tiny_models import data_dir

REF = " The answer is 42."
SPEC = " The answer is 43."


def text_server(answer: str, margin: float | None = None, probes: list | None = None) -> Starlette:
    """Streams `answer` for every request; a non-streaming request with logprobs is the near-tie probe: it answers
    in llama.cpp's logprobs shape with `margin` nats between the top-2 candidates of the divergent token."""

    async def completions(request: Request):
        body = await request.json()
        if not body.get("stream"):
            if probes is not None:
                probes.append(body)
            if margin is None:
                return JSONResponse({"choices": [{"text": " 42.", "finish_reason": "length"}]})
            content = [{"token": " 4", "logprob": -0.01, "top_logprobs": [{"token": " 4", "logprob": -0.01},
                                                                          {"token": " 5", "logprob": -6.0}]},
                       {"token": "2", "logprob": -0.6, "top_logprobs": [{"token": "2", "logprob": -0.6},
                                                                         {"token": "3", "logprob": -0.6 - margin}]}]
            return JSONResponse({"choices": [{"text": " 42", "logprobs": {"content": content},
                                              "finish_reason": "length"}]})

        async def events():
            for part, finish in ((answer[:10], None), (answer[10:], "length")):
                chunk = {"choices": [{"index": 0, "text": part, "finish_reason": finish}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(request: Request):
        return JSONResponse({"data": [{"id": "m"}]})

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models)])


def _check(spec_url: str, ref_url: str, *extra: str):
    from specbench.cli.app import app

    return CliRunner().invoke(app, ["check-lossless", "--base-url-spec", spec_url, "--base-url-ref", ref_url,
                                    "--data-dir", str(data_dir()), "--shots", "0", "--num-prompts", "1",
                                    "--max-tokens", "8", *extra], env={"HF_HUB_OFFLINE": "1"},
                              catch_exceptions=False)


def test_a_near_tied_mismatch_passes_unless_strict():
    probes: list[dict] = []
    with serve_in_thread(text_server(SPEC)) as spec, serve_in_thread(text_server(REF, 0.02, probes)) as ref:
        loose = _check(spec, ref)
        strict = _check(spec, ref, "--strict")
    assert loose.exit_code == 0, loose.output
    assert "1 near-tie" in loose.output and "margin 0.0200 nats" in loose.output and "'2' vs '3'" in loose.output
    assert strict.exit_code == 1 and "NOT LOSSLESS" in strict.output
    probe = probes[0]  # the prompt plus the common prefix cut back to a token boundary, greedy, with logprobs
    assert probe["prompt"].endswith(" The answer is") and probe["temperature"] == 0.0 and probe["logprobs"] == 5


def test_a_wide_margin_is_divergent_and_no_logprobs_is_unclassified():
    with serve_in_thread(text_server(SPEC)) as spec, serve_in_thread(text_server(REF, 2.5)) as ref:
        wide = _check(spec, ref)
    with serve_in_thread(text_server(SPEC)) as spec, serve_in_thread(text_server(REF, None)) as ref:
        bare = _check(spec, ref)
    assert wide.exit_code == 1 and "[divergent: top-2 '2' vs '3', margin 2.5000 nats]" in wide.output
    assert bare.exit_code == 1 and "[unclassified: the reference server returned no logprobs]" in bare.output


def test_classification_and_both_logprobs_shapes():
    assert classify(0.05) == NEAR_TIE and classify(0.5) == DIVERGENT and classify(None) == UNCLASSIFIED
    assert classify(0.05, threshold=0.01) == DIVERGENT
    openai = parse_logprobs({"logprobs": {"tokens": [" a", "b"], "top_logprobs": [{" a": -0.1, " c": -3.0},
                                                                                  {"d": -0.2, "b": -0.1}]}})
    assert [t.token for t in openai] == [" a", "b"] and openai[1].top == (("b", -0.1), ("d", -0.2))
    assert parse_logprobs({"text": "x"}) is None
