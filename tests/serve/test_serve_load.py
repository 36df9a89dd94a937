"""Over HTTP against `specbench serve`: a user prompt file (multi-turn replayed with the server's own answers),
--goodput, a duration-bounded ramp, and the record that this server has no prefix cache to reset."""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from typer.testing import CliRunner

K = 2
ROWS = [
    {"prompt": "The capital of France is", "category": "geo"},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"},
                  {"role": "assistant", "content": "ignored"}, {"role": "user", "content": "And then?"}],
     "category": "chat", "max_tokens": 3},
]


@pytest.fixture(scope="module")
def server(tiny_model_dir, tiny_draft_dir):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    engine = EngineConfig(target=str(tiny_model_dir), method="draft", draft=str(tiny_draft_dir), max_num_steps=K,
                          device="cpu", kv_cache_gb=0.02)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as running:
        yield running


def _cli(args: list[str]) -> str:
    from specbench.cli.app import app

    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_prompt_file_goodput_and_duration_ramp_over_http(server, tiny_model_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    output = _cli(["sweep", "--backend", "openai", "--base-url", server.url, "--tokenizer", str(tiny_model_dir),
                   "--method", "draft", "--num-steps", str(K), "--workload", f"file:{prompts}", "--no-chat-template",
                   "--max-tokens", "4", "--concurrency", "2", "--warmup", "2", "--goodput", "ttft:60000,e2el:60000",
                   "--duration", "1.5", "--ramp-up-strategy", "linear", "--ramp-up-start-rps", "2",
                   "--ramp-up-end-rps", "6", "--results-dir", str(tmp_path), "--run-id", "http", "--quiet"])
    run = tmp_path / "http"
    requests = pd.read_parquet(run / "requests.parquet")
    cells = pd.read_parquet(run / "cells.parquet")
    assert requests["error"].isna().all() and set(requests["category"]) == {"geo", "chat"}
    chat = requests[requests["category"] == "chat"]
    assert set(chat["turn"]) == {0, 1} and (chat["max_tokens"] == 4).all()
    first = requests[requests["turn"] == 0]
    assert len(first) > len(ROWS) and (first["scheduled_time"] - first["scheduled_time"].min()).max() < 1.5
    assert requests["is_good"].all() and requests["reasoning_text"].isna().all()  # generous bounds
    cell = cells.iloc[0]
    assert cell["backend"] == "openai" and cell["num_good_requests"] == len(requests)
    assert cell["good_request_fraction"] == 1.0 and cell["goodput_slo"] == "ttft:60000,e2el:60000"
    assert (cell["duration_limit_s"], cell["ramp_up_strategy"]) == (1.5, "linear")
    # specbench serve caches prefixes: the sweep empties its cache before the cell and reads the window's hit rate
    assert cell["is_cache_reset"] and cell["cache_reset_note"] == "POST /reset_prefix_cache"
    assert cell["prefix_cache_source"] == "specbench:prefix_cache_hits/queries"
    assert not (run / "recommendations.parquet").exists()  # one k over HTTP: nothing to rank
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload"]["data_files"][0]["name"] == str(prompts)
    assert "Goodput (req/s)" in output
