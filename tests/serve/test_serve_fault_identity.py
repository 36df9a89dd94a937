"""A fault-injected server says so everywhere it can: its start-up line, /version's `fault`, a /metrics label, and a
sweep or gate against it (at --base-url, or launched per k by --server-cmd) records `fault_injected` in its manifest
(read from /version) and marks its report MUTANT."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from tests.support.cli_run import run_main
from tests.support.tiny_models import data_dir

FAULT = "verify-kv-off-by-one"
STAND_IN = Path(__file__).resolve().parents[1] / "backends" / "stand_in_server.py"


def test_an_injected_server_names_its_fault_in_every_answer(tiny_model_dir, tiny_draft_dir, tmp_path):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server
    from specbench.serve.server import startup_line

    engine = EngineConfig(target=str(tiny_model_dir), method="draft", draft=str(tiny_draft_dir), max_num_steps=2,
                          device="cpu", kv_cache_gb=0.02)
    config = ServeConfig(engine, served_model_name="tiny")
    line = startup_line(config, "127.0.0.1", 8000, False, FAULT)
    assert line.startswith(f"specbench serve: MUTANT[{FAULT}] (fault injected: not a real result) tiny on "), line
    assert "MUTANT" not in startup_line(config, "127.0.0.1", 8000, False, None)
    with start_server(config, fault=injection(FAULT)) as running:
        assert httpx.get(running.url + "/version").json()["fault"] == FAULT
        metrics = httpx.get(running.url + "/metrics").text
        assert f'specbench:fault_injected{{model_name="tiny",fault="{FAULT}"}} 1.0' in metrics
        result = run_main("sweep", "--backend", "openai", "--base-url", running.url + "/v1", "--data-dir",
                          str(data_dir()), "--limit", "1", "--shots", "0", "--max-tokens", "3", "--warmup", "0",
                          "--no-speedup", "--num-steps", "0", "--results-dir", str(tmp_path), "--run-id", "mut",
                          "--quiet")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "mut" / "manifest.json").read_text())["fault_injected"] == FAULT
    assert f"MUTANT[{FAULT}] (fault injected: not a real result)" in result.stdout.splitlines()[0]


def test_a_clean_server_says_no_fault(tiny_model_dir):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(tiny_model_dir), device="cpu", kv_cache_gb=0.02)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as running:
        assert httpx.get(running.url + "/version").json()["fault"] is None
        assert "fault_injected" not in httpx.get(running.url + "/metrics").text


def test_a_gate_over_launched_servers_that_name_a_fault_is_marked(tmp_path):
    template = " ".join([shlex.quote(sys.executable), shlex.quote(str(STAND_IN)), "--port {port}",
                         "--num-steps {num_steps}", f"--fault {FAULT}"])
    result = run_main("gate", "--server-cmd", template, "-k", "2", "--data-dir", str(data_dir()), "--num-prompts",
                      "2", "--shots", "0", "--max-tokens", "4", "--stages", "outputs", "--results-dir",
                      str(tmp_path), "--quiet")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert f"MUTANT[{FAULT}], k=2" in result.stdout, result.stdout
    manifest = json.loads(next(tmp_path.glob("*/manifest.json")).read_text())
    assert manifest["fault_injected"] == FAULT
