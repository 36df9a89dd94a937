"""`specbench serve` answers text no tokenizer takes with a 400 naming the field (a lone surrogate is legal as a JSON
escape, "\\ud800", and illegal in UTF-8), and a client that goes away mid-body leaves no traceback in its log."""

from __future__ import annotations

import logging
import socket
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.serve_probe import PROMPT, assert_error, assert_still_serving  # noqa: E402

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
LONE = "\\ud800"  # as it travels: a JSON escape
SURROGATE_BODIES = [  # (route, raw body, the field the 400 must name)
    (COMPLETIONS, '{"prompt": "x%s y", "max_tokens": 1}' % LONE, "prompt"),
    (COMPLETIONS, '{"prompt": ["%s"], "max_tokens": 1}' % LONE, "prompt.0"),
    (COMPLETIONS, '{"prompt": "x", "stop": ["a%s"], "max_tokens": 1}' % LONE, "stop.0"),
    (COMPLETIONS, '{"prompt": "x", "model": "%s", "max_tokens": 1}' % LONE, "model"),
    (CHAT, '{"messages": [{"role": "user", "content": "%s"}], "max_tokens": 1}' % LONE, "messages.0.content"),
    (CHAT, '{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\udfff"}]}]}',
     "messages.0.content.0.text"),
    (COMPLETIONS, '{"prompt": "x", "max_tokens": 1, "%s": 1}' % LONE, None),  # in a key
]


@pytest.fixture(scope="module")
def client(guarded_server):
    with httpx.Client(base_url=guarded_server.url, timeout=60) as c:
        yield c


@pytest.fixture
def server_log():
    """Records uvicorn logs (where an exception in a request lands, with its traceback)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn", "uvicorn.access")]
    for logger in loggers:
        logger.addHandler(handler)
    yield records
    for logger in loggers:
        logger.removeHandler(handler)


@pytest.mark.parametrize("route, body, param", SURROGATE_BODIES, ids=[f"{i}-{p}" for i, (_, _, p) in
                                                                       enumerate(SURROGATE_BODIES)])
def test_a_lone_surrogate_is_a_400_naming_its_field(client, server_log, route, body, param):
    response = client.post(route, content=body.encode(), headers={"content-type": "application/json"})
    error = assert_error(response, 400, param)
    assert "lone surrogate" in error["message"], error
    assert_still_serving(client)
    assert [r for r in server_log if r.levelno >= logging.ERROR] == []


def test_a_paired_surrogate_escape_is_text(client):
    body = '{"prompt": "%s \\ud83d\\ude00", "max_tokens": 1}' % PROMPT.replace("\n", "\\n")
    response = client.post(COMPLETIONS, content=body.encode(), headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text


def test_text_the_tokenizer_refuses_is_a_400():
    from specbench.serve.protocol import BadRequest, _encode

    def refuse(text, **kwargs):
        raise ValueError("text input must be of type str")

    with pytest.raises(BadRequest, match=r"^the prompt cannot be tokenised \(ValueError: text input must be"):
        _encode(refuse, "hi", add_special_tokens=True)


def test_a_client_gone_mid_body_leaves_no_traceback(guarded_server, client, server_log, monkeypatch):
    import threading

    from specbench.serve import app

    read, done = app.read_body, threading.Event()

    async def watched(request, limit):
        try:
            return await read(request, limit)
        finally:
            done.set()

    monkeypatch.setattr(app, "read_body", watched)
    host, port = guarded_server.url.removeprefix("http://").split(":")
    for route in (COMPLETIONS, CHAT):
        done.clear()
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: 1000\r\n\r\n{\"prompt\": \"half".encode())
            time.sleep(0.1)  # let the server start reading the body before the client goes
        assert done.wait(30), "the server never finished reading the cut body"
        assert_still_serving(client)
    # an error log, if any, follows the handler within milliseconds: waiting longer can only miss one, never flake
    time.sleep(0.5)
    bad = [r for r in server_log if r.levelno >= logging.ERROR or r.exc_info]
    assert bad == [], [r.getMessage() for r in bad]


def test_messages_the_chat_template_refuses_are_a_400(client, server_log, monkeypatch):
    """Templates raise on what they cannot render (jinja's raise_exception: roles must alternate): a 400."""
    from specbench.serve import protocol

    class TemplateError(Exception):  # jinja2's is no ValueError either
        pass

    def refuse(tokenizer, messages):
        raise TemplateError("Conversation roles must alternate user/assistant/user/assistant/...")

    monkeypatch.setattr(protocol, "apply_chat_template", refuse)
    body = {"messages": [{"role": "assistant", "content": "x"}], "max_tokens": 1}
    error = assert_error(client.post(CHAT, json=body), 400, "messages")
    assert error["message"] == ("the model's chat template refuses these messages (TemplateError: Conversation roles "
                                "must alternate user/assistant/user/assistant/...)")
    assert [r for r in server_log if r.levelno >= logging.ERROR] == []
