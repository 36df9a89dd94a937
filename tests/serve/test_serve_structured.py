"""`specbench serve` with output constraints (issue 46): response_format json_object / json_schema, tools with
tool_choice required or named (answered as message.tool_calls), structured_outputs regex; bad constraints are 400s."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("llguidance")

from tests.support.grammar_cases import BOUNDED_SCHEMAS, TOOLS  # noqa: E402

MESSAGES = [{"role": "user", "content": "Reply in JSON."}]


@pytest.fixture(scope="module")
def client(tiny_model_dir):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(tiny_model_dir), method="ngram", max_num_steps=3, device="cpu",
                          kv_cache_gb=0.02, max_model_len=256)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as running:
        with httpx.Client(base_url=running.url, timeout=60) as c:
            yield c


def _chat(client, **fields):
    return client.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 64, "temperature": 0,
                                                     **fields})


def test_json_schema_response_conforms(client):
    import jsonschema

    schema = BOUNDED_SCHEMAS["nested"]
    response = _chat(client, response_format={"type": "json_schema",
                                              "json_schema": {"name": "nested", "schema": schema, "strict": True}})
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "stop"
    jsonschema.validate(json.loads(choice["message"]["content"]), schema)


def test_json_object_and_regex(client):
    body = _chat(client, response_format={"type": "json_object"}, max_tokens=200).json()
    choice = body["choices"][0]
    if choice["finish_reason"] == "stop":  # a random model may write one long object: then it is cut by length
        assert isinstance(json.loads(choice["message"]["content"]), dict)
    else:
        assert choice["message"]["content"].startswith("{")
    body = _chat(client, structured_outputs={"regex": "(yes|no), [0-9]{1,3}"}).json()
    import re
    assert re.fullmatch("(yes|no), [0-9]{1,3}", body["choices"][0]["message"]["content"])


def test_tool_call_comes_back_as_tool_calls(client):
    body = _chat(client, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls", body
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert set(json.loads(call["function"]["arguments"])) == {"city", "unit"}
    streamed = _chat(client, tools=TOOLS, tool_choice="required", stream=True)
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize(("fields", "param"), [
    ({"response_format": {"type": "json_schema"}}, "response_format"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}}, "response_format"),
    ({"structured_outputs": {"regex": "(unclosed"}}, None),  # compiled by the engine: refused before it is queued
])
def test_bad_constraints_are_refused(client, fields, param):
    response = _chat(client, **fields)
    assert response.status_code == 400, response.text
    if param is not None:
        assert response.json()["error"]["param"] == param


def test_the_reasoning_end_starts_the_grammar_after_it():
    from specbench.serve.protocol import parse_chat
    from tests.support.tiny_models import load_tiny_tokenizer

    raw = json.dumps({"messages": MESSAGES, "max_tokens": 8, "response_format": {"type": "json_object"}}).encode()
    tokenizer = load_tiny_tokenizer()
    assert parse_chat(raw, tokenizer, 256, 1024).params.grammar.starts_after is None
    assert parse_chat(raw, tokenizer, 256, 1024, "</think>").params.grammar.starts_after == "</think>"
