"""`specbench serve` answers hostile requests with a 4xx naming the field, before anything is tokenised or queued,
and keeps serving: after each, a valid request succeeds and /health is 200. Bodies past --max-request-bytes get 413
unread, deep nesting 400; parsing runs off the event loop."""

from __future__ import annotations

import json
import math
import threading

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from specbench.serve.request_models import MAX_MESSAGES  # noqa: E402
from tests.support.serve_probe import (  # noqa: E402
    GUARDED_MAX_MODEL_LEN,
    GUARDED_MAX_REQUEST_BYTES,
    PROMPT,
    assert_error,
    assert_still_serving,
    guarded_engine_config,
)

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
BASES = {COMPLETIONS: {"prompt": PROMPT, "max_tokens": 2}, CHAT: {"messages": [{"role": "user", "content": "hi"}],
                                                                 "max_tokens": 2}}
OVERFLOW = "__1e999__"  # json.dumps cannot write 1e999 (a float literal that parses to inf): spliced in raw
VOCAB = "__vocab__"  # the model's vocabulary size, filled in by the test

HOSTILE = [  # (route, fields over the route's valid base, the field the 400 must name)
    (COMPLETIONS, {"temperature": math.nan}, "temperature"),
    (COMPLETIONS, {"temperature": math.inf}, "temperature"),
    (CHAT, {"temperature": OVERFLOW}, "temperature"),
    (COMPLETIONS, {"temperature": -0.5}, "temperature"),
    (COMPLETIONS, {"temperature": 1e-30}, "temperature"),  # logits / 1e-30 overflows float32
    (COMPLETIONS, {"temperature": 1e39}, "temperature"),  # inf in float32
    (COMPLETIONS, {"top_p": 0}, "top_p"),
    (COMPLETIONS, {"top_p": 1e-40}, "top_p"),  # 0 in float32: would mask every token
    (CHAT, {"top_p": 1.5}, "top_p"),
    (CHAT, {"top_p": -math.inf}, "top_p"),
    (COMPLETIONS, {"top_k": -2}, "top_k"),
    (COMPLETIONS, {"top_k": VOCAB}, "top_k"),
    (COMPLETIONS, {"top_k": 2**64}, "top_k"),
    (CHAT, {"top_k": 1.5}, "top_k"),
    (COMPLETIONS, {"seed": 2**64, "temperature": 0.7}, "seed"),  # torch.Generator.manual_seed overflows
    (COMPLETIONS, {"seed": -(2**63) - 1, "temperature": 0.7}, "seed"),
    (CHAT, {"seed": "1"}, "seed"),
    (COMPLETIONS, {"max_tokens": 0}, "max_tokens"),
    (COMPLETIONS, {"max_tokens": -1}, "max_tokens"),
    (COMPLETIONS, {"max_tokens": 10**30}, "max_tokens"),
    (CHAT, {"max_tokens": math.nan}, "max_tokens"),
    (CHAT, {"max_completion_tokens": 0}, "max_completion_tokens"),
    (COMPLETIONS, {"stop": ["s"] * 17}, "stop"),
    (COMPLETIONS, {"stop": "x" * 2000}, "stop"),
    (CHAT, {"stop": [["nested"]]}, "stop"),
    (COMPLETIONS, {"n": 2}, "n"),
    (COMPLETIONS, {"frequency_penalty": math.nan}, "frequency_penalty"),
    (CHAT, {"presence_penalty": OVERFLOW}, "presence_penalty"),
    (CHAT, {"logit_bias": {"1": math.nan}}, "logit_bias"),
    (COMPLETIONS, {"logprobs": 21}, "logprobs"),  # past SAMPLING_LIMITS' MAX_LOGPROBS
    (COMPLETIONS, {"logprobs": -1}, "logprobs"),
    (COMPLETIONS, {"logprobs": True}, "logprobs"),
    (COMPLETIONS, {"prompt_logprobs": 2**64}, "prompt_logprobs"),
    (CHAT, {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    (CHAT, {"logprobs": 1}, "logprobs"),
    (CHAT, {"top_logprobs": 3}, "top_logprobs"),  # needs logprobs: true
    (COMPLETIONS, {"prompt": []}, "prompt"),
    (COMPLETIONS, {"prompt": [-1]}, "prompt"),
    (COMPLETIONS, {"prompt": [VOCAB]}, "prompt"),
    (COMPLETIONS, {"prompt": [2**70]}, "prompt"),
    (COMPLETIONS, {"prompt": [[1, 2], [3]]}, "prompt"),
    (COMPLETIONS, {"prompt": {"text": "x"}}, "prompt"),
    (COMPLETIONS, {"prompt": [7] * GUARDED_MAX_MODEL_LEN}, "prompt"),  # no room left in the context
    (CHAT, {"messages": []}, "messages"),
    (CHAT, {"messages": [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)}, "messages"),
    (CHAT, {"messages": [{"role": "user"}]}, "messages.0.content"),
    (CHAT, {"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    (CHAT, {"messages": "hi"}, "messages"),
    (CHAT, {"stream": "yes"}, "stream"),
    (CHAT, {"stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
]


def _raw(route: str, fields: dict, vocab_size: int) -> bytes:
    text = json.dumps({**BASES[route], **fields})  # NaN / Infinity literals, which Python's json also reads
    return text.replace(f'"{OVERFLOW}"', "1e999").replace(f'"{VOCAB}"', str(vocab_size + 1)).encode()


@pytest.fixture(scope="module")
def client(guarded_server):
    with httpx.Client(base_url=guarded_server.url, timeout=60) as c:
        yield c


@pytest.mark.parametrize(("route", "fields", "param"), HOSTILE,
                         ids=[f"{'chat' if r == CHAT else 'cmpl'}-{p}-{i}" for i, (r, _, p) in enumerate(HOSTILE)])
def test_a_hostile_field_is_a_400_naming_it_and_the_server_goes_on(guarded_server, client, route, fields, param):
    num_free = guarded_server.loop.engine.scheduler.block_manager.num_free_blocks
    body = _raw(route, fields, guarded_server.loop.engine.vocab_size)
    assert len(body) < GUARDED_MAX_REQUEST_BYTES  # refused for its content, not its size
    assert_error(client.post(route, content=body, headers={"content-type": "application/json"}), 400, param)
    assert_still_serving(client)
    assert guarded_server.loop.engine.scheduler.block_manager.num_free_blocks == num_free


NESTED_FIELD = json.dumps({"prompt": PROMPT, "tools": json.loads("[" * 70 + "]" * 70)}).encode()  # past MAX_JSON_DEPTH


@pytest.mark.parametrize("body", [b"[]", b'"x"', b"\xff\xfe{", b"{" * 3 + b"}" * 3, b"[" * 10_000 + b"]" * 10_000,
                                  NESTED_FIELD],
                         ids=["array", "string", "not-utf8", "broken", "nested-10000", "nested-in-a-field"])
def test_a_body_that_is_no_request_is_a_400(client, body):
    error = assert_error(client.post(COMPLETIONS, content=body, headers={"content-type": "application/json"}), 400)
    assert "JSON" in error["message"] or "body" in error["message"], error
    assert_still_serving(client)


def test_a_body_past_the_limit_is_a_413_before_it_is_read(client):
    big = json.dumps({"prompt": "x" * GUARDED_MAX_REQUEST_BYTES}).encode()
    error = assert_error(client.post(COMPLETIONS, content=big, headers={"content-type": "application/json"}), 413)
    assert str(GUARDED_MAX_REQUEST_BYTES) in error["message"] and "max-request-bytes" in error["message"]

    def chunks():  # chunked transfer declares no length: the server counts what arrives
        yield b'{"prompt": "'
        for _ in range(GUARDED_MAX_REQUEST_BYTES // 4096 + 1):
            yield b"y" * 4096
        yield b'"}'

    with httpx.Client(base_url=str(client.base_url), timeout=60) as fresh:
        assert_error(fresh.post(CHAT, content=chunks(), headers={"content-type": "application/json"}), 413)
    just_under = json.dumps({"prompt": [5] * 10, "max_tokens": 1, "user": "u" * (GUARDED_MAX_REQUEST_BYTES // 2)})
    assert client.post(COMPLETIONS, content=just_under.encode(),
                       headers={"content-type": "application/json"}).status_code == 200
    assert_still_serving(client)


def test_parsing_runs_off_the_event_loop(client, monkeypatch):
    """A request stuck in tokenisation holds a parser thread, not the server: /health and other requests answer."""
    from specbench.serve import protocol

    encode, release, entered = protocol._encode, threading.Event(), threading.Event()

    def slow_encode(tokenizer, text, **kwargs):
        if "BLOCK" in text:
            entered.set()
            assert release.wait(30)
        return encode(tokenizer, text, **kwargs)

    monkeypatch.setattr(protocol, "_encode", slow_encode)
    result: dict[str, httpx.Response] = {}
    blocked = threading.Thread(target=lambda: result.setdefault(
        "r", httpx.post(str(client.base_url) + COMPLETIONS, json={"prompt": "BLOCK", "max_tokens": 1}, timeout=60)))
    blocked.start()
    try:
        assert entered.wait(30)
        assert_still_serving(client)  # while the other request is still being tokenised
        assert "r" not in result
    finally:
        release.set()
        blocked.join(30)
    assert result["r"].status_code == 200


def test_probe_auth_is_configurable(tiny_model_dir, monkeypatch):
    from specbench.engine.llm_engine import LLMEngine
    from specbench.serve import ServeConfig, start_server

    monkeypatch.setenv("SPECBENCH_TEST_KEY", "sekret")
    config = guarded_engine_config(tiny_model_dir)
    engine = LLMEngine(config)
    for is_probe_auth in (False, True):
        serve_config = ServeConfig(config, served_model_name="tiny", api_key_env="SPECBENCH_TEST_KEY",
                                   is_probe_auth=is_probe_auth)
        with start_server(serve_config, engine=engine) as running:
            for path in ("/health", "/metrics"):
                assert httpx.get(running.url + path).status_code == (401 if is_probe_auth else 200)
                assert httpx.get(running.url + path, headers={"authorization": "Bearer sekret"}).status_code == 200
            assert_error(httpx.post(running.url + COMPLETIONS, json={"prompt": PROMPT}), 401)
