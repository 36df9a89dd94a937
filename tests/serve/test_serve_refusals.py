"""`specbench serve` refuses what it cannot do, in OpenAI's error shape: max_tokens past the context, fields the
engine cannot honour (named in the message), unknown routes, wrong methods, bad JSON, internal errors."""

from __future__ import annotations

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

PROMPT = "Question: 1 + 1?\nAnswer:"


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(tiny_model_dir), method="ngram", max_num_steps=2, device="cpu", kv_cache_gb=0.02,
                          max_model_len=256)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as running:
        yield running


@pytest.fixture()
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def _assert_openai_error(response: httpx.Response, status: int, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["code"] == status and body["error"]["message"]
    if param is not None:
        assert body["error"]["param"] == param, body
    return body["error"]


def _num_prompt_tokens(client, text: str) -> int:
    body = client.post("/v1/completions", json={"prompt": text, "max_tokens": 1, "temperature": 0}).json()
    return body["usage"]["prompt_tokens"]


def test_max_tokens_past_the_context_left_is_refused(client):
    assert client.get("/v1/models").json()["data"][0]["max_model_len"] == 256
    room = 256 - _num_prompt_tokens(client, PROMPT)
    error = _assert_openai_error(
        client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": room + 1}), 400, "max_tokens")
    assert f"at most {room} tokens" in error["message"]
    huge = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                     "max_completion_tokens": 100000, "stream": True})
    assert _assert_openai_error(huge, 400, "max_completion_tokens")["type"] == "invalid_request_error"
    fits = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 3, "temperature": 0})
    assert fits.status_code == 200 and fits.json()["usage"]["completion_tokens"] <= 3


@pytest.mark.parametrize(("field", "value"), [
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),  # tool_choice "auto"
    ("tool_choice", "auto"),
    ("response_format", {"type": "grammar"}),
    ("frequency_penalty", 0.5),
    ("presence_penalty", -1),
    ("logit_bias", {"5": 100}),
    ("n", 2),
    ("functions", [{"name": "f"}]),
    ("min_tokens", 5),  # vLLM extensions the engine does not implement are unknown fields
    ("repetition_penalty", 1.2),
])
def test_chat_fields_the_engine_cannot_honour_are_refused_by_name(client, field, value):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, field: value}
    error = _assert_openai_error(client.post("/v1/chat/completions", json=body), 400, field)
    assert f"'{field}'" in error["message"] and "not supported" in error["message"]


@pytest.mark.parametrize(("field", "value"), [("echo", True), ("best_of", 3), ("suffix", "x"),
                                              ("logit_bias", {"1": -100}), ("n", 4)])
def test_completion_fields_the_engine_cannot_honour_are_refused_by_name(client, field, value):
    error = _assert_openai_error(
        client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 2, field: value}), 400, field)
    assert f"'{field}'" in error["message"]


def test_harmless_fields_and_neutral_values_are_accepted(client):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0, "user": "u-1",
            "frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {}, "n": 1, "tools": [],
            "tool_choice": "none", "response_format": {"type": "text"}, "logprobs": False, "stream": True,
            "stream_options": {"include_usage": True}}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200 and response.text.rstrip().endswith("data: [DONE]")


def test_malformed_values_name_the_field(client):
    _assert_openai_error(client.post("/v1/completions", json={"prompt": PROMPT, "temperature": "hot"}), 400,
                         "temperature")
    _assert_openai_error(client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": True}), 400,
                         "max_tokens")
    _assert_openai_error(client.post("/v1/chat/completions", json={"messages": [{"role": "tool", "content": "x"}]}),
                         400, "messages.0.role")
    _assert_openai_error(client.post("/v1/chat/completions", json={"max_tokens": 2}), 400, "messages")
    _assert_openai_error(client.post("/v1/completions", content=b"{not json", headers={"content-type":
                                                                                       "application/json"}), 400)


def test_unknown_routes_and_wrong_methods_answer_in_the_openai_shape(client):
    assert _assert_openai_error(client.get("/v1/nothing"), 404)["type"] == "not_found_error"
    wrong = client.get("/v1/completions")
    assert _assert_openai_error(wrong, 405)["type"] == "invalid_request_error"
    assert "POST" in wrong.headers["allow"]
    _assert_openai_error(client.delete("/v1/models"), 405)
    _assert_openai_error(client.post("/v1/completions", json={"model": "other", "prompt": PROMPT}), 404, "model")


def test_an_internal_error_is_a_500_in_the_openai_shape(server, client, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(server.loop, "submit", broken)
    error = _assert_openai_error(client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 2}), 500)
    assert error["type"] == "server_error" and "injected" in error["message"]
