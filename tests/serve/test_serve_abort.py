"""A request whose client goes away is aborted in the engine (KV freed, counted in /metrics, no more steps for it);
shutdown (in-process stop, SIGINT, SIGTERM) aborts what is in flight and ends without a traceback or uvicorn's
"Cancel N running task(s)"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.ports import free_port  # noqa: E402

STEP_DELAY_S = 0.02  # each engine step sleeps: a 400-token request then runs for >= 8 s unless aborted
LONG = {"prompt": "Question: 1 + 1?\nAnswer:", "max_tokens": 400, "ignore_eos": True, "temperature": 0}


def _engine_config(tiny_model_dir):
    from specbench.config import EngineConfig

    return EngineConfig(target=str(tiny_model_dir), method="ngram", max_num_steps=2, device="cpu", kv_cache_gb=0.02,
                        max_model_len=512)


def _slow_down(engine) -> None:
    step = engine.step

    def slow_step():
        time.sleep(STEP_DELAY_S)
        return step()

    engine.step = slow_step


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    from specbench.engine.llm_engine import LLMEngine
    from specbench.serve import ServeConfig, start_server

    config = _engine_config(tiny_model_dir)
    engine = LLMEngine(config)
    _slow_down(engine)
    with start_server(ServeConfig(config, served_model_name="tiny"), engine=engine) as running:
        yield running


def _num_aborted(url: str) -> float:
    text = httpx.get(url + "/metrics").text
    line = next(line for line in text.splitlines() if line.startswith("specbench:request_aborted_total{"))
    return float(line.rsplit(" ", 1)[1])


def _wait_for(predicate, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _assert_idle_and_freed(engine, num_free_blocks: int) -> None:
    assert not engine.has_unfinished() and engine.scheduler.block_manager.num_free_blocks == num_free_blocks
    num_steps = len(engine.step_stats)
    time.sleep(10 * STEP_DELAY_S)
    assert len(engine.step_stats) == num_steps  # nothing generated for nobody


def test_a_client_that_disconnects_mid_stream_aborts_its_request(server):
    engine = server.loop.engine
    num_free = engine.scheduler.block_manager.num_free_blocks
    before = _num_aborted(server.url)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        with client.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as response:
            assert response.status_code == 200
            assert next(line for line in response.iter_lines() if line.startswith("data: "))
            assert engine.has_unfinished()
        # leaving the block closes the connection with the stream half read
    _wait_for(lambda: _num_aborted(server.url) == before + 1)
    _assert_idle_and_freed(engine, num_free)


def test_a_non_streaming_client_that_goes_away_aborts_its_request(server):
    engine = server.loop.engine
    num_free = engine.scheduler.block_manager.num_free_blocks
    before = _num_aborted(server.url)
    with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes the connection
        httpx.post(server.url + "/v1/completions", json=LONG, timeout=httpx.Timeout(30, read=1.0))
    _wait_for(lambda: _num_aborted(server.url) == before + 1)
    _assert_idle_and_freed(engine, num_free)


def test_stopping_the_server_aborts_requests_in_flight_at_once(tiny_model_dir, capfd):
    from specbench.engine.llm_engine import LLMEngine
    from specbench.serve import ServeConfig, start_server

    config = _engine_config(tiny_model_dir)
    engine = LLMEngine(config)
    _slow_down(engine)
    running = start_server(ServeConfig(config, served_model_name="tiny"), engine=engine)
    results: dict[str, object] = {}

    def stream() -> None:
        with httpx.stream("POST", running.url + "/v1/completions", json={**LONG, "stream": True}, timeout=30) as r:
            results["stream"] = [line for line in r.iter_lines() if line]

    def whole() -> None:
        results["whole"] = httpx.post(running.url + "/v1/completions", json=LONG, timeout=30)

    threads = [threading.Thread(target=stream), threading.Thread(target=whole)]
    for thread in threads:
        thread.start()
    _wait_for(lambda: len(engine.scheduler.running) == 2)
    start = time.monotonic()
    running.stop()
    elapsed = time.monotonic() - start
    for thread in threads:
        thread.join(timeout=10)
    assert elapsed < 1.9, elapsed  # not uvicorn's 2 s graceful-shutdown timeout
    lines = results["stream"]
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2].removeprefix("data: "))["error"]
    assert error["code"] == 503 and "shutting down" in error["message"]
    whole_response = results["whole"]
    assert whole_response.status_code == 503 and whole_response.json()["error"]["type"] == "service_unavailable"
    assert not engine.has_unfinished()
    err = capfd.readouterr().err
    assert "Cancel" not in err and "Traceback" not in err, err


@pytest.mark.slow  # two `specbench serve` processes (imports and model build: ~10-30 s each on 2 cores)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_process_shuts_down_cleanly_on_a_signal(tiny_model_dir, sig):
    port = free_port()
    command = [sys.executable, "-m", "specbench", "serve", "--target", str(tiny_model_dir), "--device", "cpu",
               "--kv-cache-gb", "0.05", "--max-model-len", "2048", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        banner = process.stdout.readline()
        assert banner.startswith("specbench serve:"), banner + process.stderr.read()
        url = f"http://127.0.0.1:{port}"
        body = {**LONG, "max_tokens": 2000, "stream": True}
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as response:
            lines = response.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))
            process.send_signal(sig)
            rest = [line for line in lines if line]
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "Traceback" not in err and "Cancel" not in err, err
    assert "specbench serve: stopped" in out
    assert rest[-1] == "data: [DONE]"
    if '"finish_reason":"length"' not in "".join(rest):  # the request was still running: it was aborted
        assert '"code":503' in rest[-2]
