"""A hostile server cannot hold the client past a deadline or crash it with a wrong-shaped answer.

One threaded http.server on 127.0.0.1 plays every part: it drips its answer one byte every 0.2 s, says nothing at
all, floods, or answers JSON of the wrong shape. Each call must end within its deadline plus a generous margin with
one error line naming the endpoint (the margin absorbs a busy machine; a hang would take minutes)."""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from specbench.backends.cache_reset import PrefixCacheResetter
from specbench.backends.deadline import DeadlineClient, ServerAnswerError, SideDeadlines
from specbench.backends.http_stream import run_request
from specbench.backends.near_tie import UNCLASSIFIED, diagnose
from specbench.backends.request_body import HttpRequest
from specbench.backends.server_adapters import SERVER_ADAPTERS
from specbench.backends.server_info import read_models, read_server_info, scrape_spec_counters

DEADLINE_S = 0.5
MARGIN_S = 5.0  # never tight: only a hang (20 s of dripping, or forever) exceeds it
DRIP_S = 0.2
DRIP_BYTES = 100  # 20 s at DRIP_S a byte


class _Hostile(BaseHTTPRequestHandler):
    """GET/POST /<mode>/<path>: the mode picks the misbehaviour; the rest is the endpoint asked for."""

    answers: dict[str, tuple[int, bytes]] = {}  # "/mode" -> (status, body) for the "answer" modes
    stop = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.do_GET()

    def do_GET(self) -> None:
        mode = self.path.split("/")[1]
        try:
            if mode == "silent":  # accepts, then sends nothing, not even a status line
                self.stop.wait(60)
            elif mode == "drip":
                self._drip(b"x" * DRIP_BYTES, "text/plain")
            elif mode == "dripsse":  # an event stream that never completes its first event
                self._drip(b'data: {"choices": [{"index": 0, "text": "a"}]}' * 10, "text/event-stream")
            elif mode == "flood":  # 2 MiB, fast
                self._send(200, b"{" + b" " * (2 << 20) + b"}")
            else:
                self._send(*self.answers[self.path])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def _drip(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i in range(len(body)):
            self.wfile.write(body[i:i + 1])
            self.wfile.flush()
            if self.stop.wait(DRIP_S):
                return

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    _Hostile.stop.set()
    server.shutdown()
    server.server_close()


def _client(root: str, mode: str) -> DeadlineClient:
    return DeadlineClient(f"{root}/{mode}", deadlines=SideDeadlines(DEADLINE_S, DEADLINE_S, DEADLINE_S))


def _bounded(call, bound_s: float = DEADLINE_S + MARGIN_S):
    started = time.monotonic()
    result = call()
    assert time.monotonic() - started < bound_s, "the call outlived its deadline"
    return result


# --- deadlines -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["drip", "silent"])
def test_a_metrics_scrape_ends_at_its_deadline(hostile, mode):
    counters, note = _bounded(lambda: scrape_spec_counters(_client(hostile, mode), None, "no adapter"))
    assert counters is None and note == "could not scrape /metrics (GET /metrics: no complete answer within 0.5 s)"


@pytest.mark.parametrize("mode", ["drip", "silent"])
def test_a_cache_reset_ends_at_its_deadline(hostile, mode):
    reset = _bounded(lambda: PrefixCacheResetter(_client(hostile, mode)).reset())
    assert not reset.is_reset and reset.note == "failed: POST /reset_prefix_cache: no complete answer within 0.5 s"


def test_server_info_ends_at_its_deadlines(hostile):
    # /v1/models stalls: the optional probes (/version, /props, /metrics) are not tried
    info = _bounded(lambda: read_server_info(_client(hostile, "drip"), None))
    assert info.models == () and info.models_error == "GET /v1/models: no complete answer within 0.5 s"
    assert info.version is None


def test_a_completion_stream_ends_at_the_request_timeout(hostile):
    async def one():
        async with httpx.AsyncClient(base_url=f"{hostile}/dripsse", timeout=DEADLINE_S) as client:
            return await run_request(client, HttpRequest("/v1/completions", {"stream": True}), DEADLINE_S)

    state, error = _bounded(lambda: asyncio.run(one()))
    assert error == "timeout: no complete response within 0.5 s" and state.finish_reason is None


def test_a_near_tie_probe_ends_at_its_deadline(hostile):
    diagnosis = _bounded(lambda: diagnose(_client(hostile, "drip"), "m", "p", "ab", "ac", deadline_s=DEADLINE_S))
    assert diagnosis.verdict == UNCLASSIFIED
    assert diagnosis.note == "logprobs probe failed (POST /v1/completions: no complete answer within 0.5 s)"


def test_a_readiness_probe_that_drips_cannot_hold_the_launch(hostile, tmp_path):
    import sys

    from specbench.backends.server_process import ServerNotReady, ServerProcess

    # a child that does nothing: readiness is polled against the dripping server's port instead
    port = int(hostile.rsplit(":", 1)[1])
    server = ServerProcess((sys.executable, "-c", "import time; time.sleep(30)"), port, tmp_path / "s.log")
    server.start()
    try:
        with pytest.raises(ServerNotReady, match="was not ready within 0.5 s"):
            _bounded(lambda: server.wait_ready(DEADLINE_S), DEADLINE_S + 2.0 + MARGIN_S)
    finally:
        server.stop()


def test_an_oversized_answer_is_refused(hostile):
    with pytest.raises(ServerAnswerError, match=r"^GET /version: the answer exceeds 1048576 bytes$"):
        _bounded(lambda: _client(hostile, "flood").get("/version", DEADLINE_S))


def test_a_refused_connection_is_one_line(hostile):
    from tests.support.ports import closed_port_url

    with pytest.raises(ServerAnswerError, match=r"^GET /metrics: ConnectError"):
        DeadlineClient(closed_port_url()).get("/metrics", DEADLINE_S)


# --- answers of the wrong shape ------------------------------------------------------------------------------------

MODELS_SHAPES = [
    (b"[1, 2]", "unexpected answer (the answer: Input should be a valid dictionary"),
    (b'{"data": 5}', "unexpected answer (data: Input should be a valid list)"),
    (b'{"data": [{"object": "model"}]}', "unexpected answer (data.0.id: Field required)"),
    (b'{"data": [{"id": 7}]}', "unexpected answer (data.0.id: Input should be a valid string)"),
    (b'{"object": "list"}', "unexpected answer (data: Field required)"),
    (b"null", "unexpected answer (the answer: Input should be a valid dictionary"),
    (b"<html>oops</html>", "the answer is not JSON"),
    (b"\xff\xfe", "the answer is not JSON"),
]


@pytest.mark.parametrize("body, message", MODELS_SHAPES)
def test_a_models_list_of_the_wrong_shape_is_one_line(hostile, body, message):
    key = f"/shape{MODELS_SHAPES.index((body, message))}"
    _Hostile.answers[f"{key}/v1/models"] = (200, body)
    with pytest.raises(ServerAnswerError) as err:
        read_models(_client(hostile, key.strip("/")))
    assert str(err.value).startswith(f"GET /v1/models: {message}") and "\n" not in str(err.value)


def test_a_backend_on_a_wrong_shaped_models_list_stops_with_one_error(hostile):
    from specbench.backends.openai_backend import OpenAIBackend
    from specbench.errors import SpecbenchError
    from specbench.runs.sweep_config import SweepConfig

    _Hostile.answers["/badmodels/v1/models"] = (200, b'{"data": {"id": "m"}}')
    config = SweepConfig(backend="openai", base_url=f"{hostile}/badmodels", info_timeout=DEADLINE_S,
                         metrics_timeout=DEADLINE_S)
    with pytest.raises(SpecbenchError, match=r"/v1/models \(GET /v1/models: unexpected answer \(data: Input should "
                                             r"be a valid list.*\); pass --model NAME$"):
        OpenAIBackend(config)


def test_optional_probes_and_metrics_of_the_wrong_shape_are_ignored(hostile):
    for path, body in (("/version", b"[1]"), ("/props", b'"text"'), ("/metrics", b'{"not": "prometheus"}'),
                       ("/v1/models", b'{"data": [{"id": "m", "extra": [1]}], "object": "list"}')):
        _Hostile.answers[f"/odd{path}"] = (200, body)
    client = _client(hostile, "odd")
    info = read_server_info(client, None)
    assert info.models == ("m",) and info.version is None and info.probe.props is None and info.probe.samples == ()
    counters, note = scrape_spec_counters(client, SERVER_ADAPTERS.create("vllm"), "no adapter")
    assert counters is None and note == "the server's /metrics exports no vllm speculative-decoding counters"


def test_cache_reset_and_probe_answers_of_the_wrong_shape(hostile):
    _Hostile.answers["/odd2/reset_prefix_cache"] = (500, b'{"error": [1, 2]}')
    reset = PrefixCacheResetter(_client(hostile, "odd2")).reset()
    assert not reset.is_reset and reset.note == "POST /reset_prefix_cache answered http 500"
    _Hostile.answers["/odd2/v1/completions"] = (200, b'{"choices": "none"}')
    diagnosis = diagnose(_client(hostile, "odd2"), "m", "p", "ab", "ac", deadline_s=DEADLINE_S)
    assert diagnosis.verdict == UNCLASSIFIED
    assert diagnosis.note == "logprobs probe failed (unexpected answer: no choices[0] object)"
