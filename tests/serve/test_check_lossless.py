"""`specbench check-lossless` against a server pair: `specbench serve` (CLI subprocess, draft k=2) vs a plain
server is lossless; against a server of another model it is not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest

# The serving stack is a dependency of specbench, but the GPU image lacks it: skip there, run in CI.
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from typer.testing import CliRunner

from tests.support.ports import free_port
from tests.support.tiny_models import data_dir

START_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def spec_server(tiny_model_dir, tiny_draft_dir):
    """`specbench serve` as a user runs it."""
    port = free_port()
    command = [sys.executable, "-c", "from specbench.cli.app import main; main()", "serve", "--target",
               str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir), "--num-steps", "2",
               "--device", "cpu", "--kv-cache-gb", "0.02", "--port", str(port)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "specbench serve did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _in_process(target):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    return start_server(ServeConfig(EngineConfig(target=str(target), device="cpu", kv_cache_gb=0.02)))


def _check(spec_url: str, ref_url: str, *args: str):
    from specbench.cli.app import app

    return CliRunner().invoke(app, ["check-lossless", "--base-url-spec", spec_url, "--base-url-ref", ref_url,
                                    "--data-dir", str(data_dir()), "--max-tokens", "8", "--concurrency", "2", *args],
                              env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)


@pytest.mark.slow  # the module's server fixture, ~5 s: the not-slow loop stays under 5 min
def test_speculative_server_is_lossless_against_a_plain_one(spec_server, tiny_model_dir):
    with _in_process(tiny_model_dir) as ref:
        completions = _check(spec_server, ref.url, "--workload", "gsm8k", "--shots", "1", "--limit", "3")
        chat = _check(spec_server, ref.url, "--workload", "mt_bench", "--limit", "2")
    assert completions.exit_code == 0 and "3/3 turns identical" in completions.output, completions.output
    assert chat.exit_code == 0 and "4/4 turns identical" in chat.output and "LOSSLESS" in chat.output


@pytest.mark.slow  # the module's server fixture, ~5 s: the not-slow loop stays under 5 min
def test_a_different_model_is_reported_not_lossless(spec_server, tiny_draft_dir):
    with _in_process(tiny_draft_dir) as other:
        result = _check(spec_server, other.url, "--workload", "gsm8k", "--shots", "1", "--limit", "3")
    assert result.exit_code == 1 and "NOT LOSSLESS" in result.output, result.output
    assert "differs at char" in result.output


@pytest.mark.slow  # starts a second server: ~10 s
def test_check_command_runs_the_server_pair_check(spec_server, tiny_model_dir, tiny_draft_dir):
    from specbench.cli.app import app

    def check(ref_url: str):
        return CliRunner().invoke(app, ["check", "--base-url-spec", spec_server, "--base-url-ref", ref_url,
                                        "--data-dir", str(data_dir()), "--max-tokens", "8"],
                                  env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)

    with _in_process(tiny_model_dir) as same:
        assert check(same.url).exit_code == 0
    with _in_process(tiny_draft_dir) as other:
        result = check(other.url)
    assert result.exit_code == 1 and "NOT LOSSLESS" in result.output, result.output
