"""A request the engine fails on fails alone: it is answered 500 (or an SSE error event), its KV is freed, the requests
in flight with it finish normally, and /health stays 200. Only an engine that keeps failing is reported dead."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.serve_probe import PROMPT, assert_error, assert_still_serving  # noqa: E402

POISON_SEED = 424242  # the request whose sampling raises
# Until the poisoned request reaches the engine each step sleeps, so the good requests (>= 8 steps) are still
# running when it arrives, however loaded the machine; then steps run at full speed.
STEP_DELAY_S = 0.1
NUM_GOOD_TOKENS = 24
GOOD = {"prompt": PROMPT, "max_tokens": NUM_GOOD_TOKENS, "ignore_eos": True, "temperature": 0}


def _counter(url: str, name: str) -> float:
    line = next(line for line in httpx.get(url + "/metrics").text.splitlines()
                if line.startswith(f"specbench:{name}_total{{"))
    return float(line.rsplit(" ", 1)[1])


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture()
def poisoned(guarded_server, monkeypatch):
    """Sampling raises for any batch holding the poisoned request; steps are slow until it arrives."""
    from specbench.engine import step_runner

    engine = guarded_server.loop.engine
    build, step = step_runner.build_sampling_tensors, engine.step
    arrived = threading.Event()

    def build_or_raise(params, *args, **kwargs):
        if any(p.seed == POISON_SEED for p in params):
            raise RuntimeError("injected sampling failure")
        return build(params, *args, **kwargs)

    def slow_step():
        scheduler = engine.scheduler
        if any(r.sampling_params.seed == POISON_SEED for r in (*scheduler.waiting, *scheduler.running)):
            arrived.set()
        if not arrived.is_set():
            time.sleep(STEP_DELAY_S)
        return step()

    monkeypatch.setattr(step_runner, "build_sampling_tensors", build_or_raise)
    monkeypatch.setattr(engine, "step", slow_step)
    return guarded_server


@pytest.mark.parametrize("is_stream", [False, True], ids=["whole", "stream"])
def test_the_request_the_engine_fails_on_fails_alone(poisoned, is_stream, caplog):
    url, engine = poisoned.url, poisoned.loop.engine
    num_free = engine.scheduler.block_manager.num_free_blocks
    num_failed = _counter(url, "request_failed")
    results: dict[str, object] = {}

    def stream_good() -> None:
        with httpx.stream("POST", url + "/v1/completions", json={**GOOD, "stream": True}, timeout=60) as response:
            results["stream"] = (response.status_code, [line for line in response.iter_lines() if line])

    def whole_good() -> None:
        results["whole"] = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": NUM_GOOD_TOKENS, "ignore_eos": True})

    threads = [threading.Thread(target=stream_good), threading.Thread(target=whole_good)]
    for thread in threads:
        thread.start()
    _wait_for(lambda: len(engine.scheduler.running) == 2)
    bad = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0.7, "seed": POISON_SEED, "stream": is_stream}
    response = httpx.post(url + "/v1/completions", json=bad, timeout=60)
    assert poisoned.loop.is_healthy and httpx.get(url + "/health").status_code == 200
    for thread in threads:
        thread.join(60)

    if is_stream:  # the stream had begun: the failure is its last event before [DONE]
        assert response.status_code == 200
        events = [line.removeprefix("data: ") for line in response.text.splitlines() if line]
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2])["error"]
        assert error["code"] == 500
    else:
        error = assert_error(response, 500)
        assert error["type"] == "server_error"
    assert "injected sampling failure" in error["message"] and "failed on this request" in error["message"]

    status, lines = results["stream"]
    assert status == 200 and lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all("error" not in chunk for chunk in chunks) and chunks[-1]["choices"][0]["finish_reason"] == "length"
    whole = results["whole"]
    assert whole.status_code == 200, whole.text
    assert whole.json()["usage"]["completion_tokens"] == NUM_GOOD_TOKENS
    _wait_for(lambda: not engine.has_unfinished())
    assert engine.scheduler.block_manager.num_free_blocks == num_free  # the failed request's KV is back
    assert engine.scheduler.max_concurrency == poisoned.loop.engine.config.max_concurrency  # isolation ended
    assert _counter(url, "request_failed") == num_failed + 1
    # It failed in a batch with the good requests (all suspects), then alone while they were re-admitted one by one.
    assert [r.getMessage() for r in caplog.records].count("engine step failed") == 2
    assert_still_serving(httpx.Client(base_url=url, timeout=60))


def test_a_request_the_engine_cannot_admit_fails_alone(guarded_server, monkeypatch):
    """add_request raising anything (not only a SpecbenchError refusal) fails that request, not the loop."""
    engine = guarded_server.loop.engine
    add = engine.add_request

    def add_or_raise(prompt, params, **kwargs):
        if params.seed == POISON_SEED:
            raise OverflowError("injected admission failure")
        return add(prompt, params, **kwargs)

    monkeypatch.setattr(engine, "add_request", add_or_raise)
    with httpx.Client(base_url=guarded_server.url, timeout=60) as client:
        response = client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 2, "seed": POISON_SEED})
        assert "injected admission failure" in assert_error(response, 500)["message"]
        assert_still_serving(client)
