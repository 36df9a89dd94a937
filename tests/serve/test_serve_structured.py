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


def _sse_events(text: str) -> list[dict]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}],
                         ids=["required", "named"])
def test_streamed_tool_call_deltas_reassemble_to_the_whole_response(client, tool_choice):
    """OpenAI's stream shape: the call's index, id, type and name first (empty arguments), then argument fragments
    only, finish_reason tool_calls; the fragments concatenate to the non-streamed response's arguments, and
    specbench's own stream parsing (backends/stream_state.py) reassembles the call."""
    from specbench.backends.stream_state import StreamState
    from specbench.grammar.conformance import judge
    from specbench.grammar.spec import GrammarSpec

    whole = _chat(client, tools=TOOLS, tool_choice=tool_choice).json()["choices"][0]
    assert whole["finish_reason"] == "tool_calls", whole
    (expected,) = whole["message"]["tool_calls"]
    streamed = _chat(client, tools=TOOLS, tool_choice=tool_choice, stream=True)
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")
    events = _sse_events(streamed.text)
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    calls = [entry for d in deltas for entry in d.get("tool_calls", ())]
    assert not any(d.get("content") for d in deltas)  # the call comes as tool_calls only
    head, *fragments = calls
    assert head["index"] == 0 and head["id"].startswith("call_") and head["type"] == "function"
    assert head["function"] == {"name": expected["function"]["name"], "arguments": ""}
    assert fragments and all(set(f) == {"index", "function"} and set(f["function"]) == {"arguments"}
                             for f in fragments)
    arguments = "".join(f["function"]["arguments"] for f in fragments)
    assert arguments == expected["function"]["arguments"]
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "tool_calls"
    state = StreamState()
    for i, event in enumerate(events):
        state.add_event(json.dumps(event), float(i))
    (call,) = state.tool_calls.values()
    assert (call.call_id, call.name, call.arguments) == (head["id"], head["function"]["name"], arguments)
    assert state.finish_reason == "tool_calls" and state.text == ""
    assert judge(GrammarSpec.tool_call(TOOLS), state.answer_text).is_conformant, state.answer_text
