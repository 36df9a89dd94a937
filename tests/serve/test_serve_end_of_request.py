"""Plain decoding over `specbench serve` reads what the embedded engine reads on identical outputs: one token per
emission, the end-of-sequence token included (its step sends no text), so TPOT spans to the last token."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from typer.testing import CliRunner

from tests.support.tiny_models import EOS_ID, data_dir

EOS_BOOST = 1.6  # the tiny model's end-of-sequence row scaled up: some gsm8k answers end on it within 32 tokens


def _sweep(args: list[str]) -> None:
    from specbench.cli.app import app

    result = CliRunner().invoke(app, ["sweep", *args], env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.mark.slow  # an engine in-process and one behind `specbench serve` (~20 s on a busy 2-core machine)
def test_plain_decoding_over_http_ends_at_the_eos_token_as_embedded(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = load_file(model / "model.safetensors")
    weights["lm_head.weight"][EOS_ID] *= EOS_BOOST
    save_file(weights, model / "model.safetensors")
    common = ["--workload", "gsm8k", "--limit", "8", "--shots", "1", "--max-tokens", "32", "--concurrency", "1",
              "--data-dir", str(data_dir()), "--warmup", "0", "--quiet", "--results-dir", str(tmp_path)]
    _sweep(["--target", str(model), "--device", "cpu", "--kv-cache-gb", "0.02", "--run-id", "local", "--method", "none",
            *common])
    engine = EngineConfig(target=str(model), device="cpu", kv_cache_gb=0.02)
    with start_server(ServeConfig(engine, served_model_name="tiny")) as running:
        _sweep(["--backend", "openai", "--base-url", running.url, "--run-id", "http", *common])
    local, http = (pd.read_parquet(tmp_path / side / "requests.parquet").sort_values("sample_id")
                   for side in ("local", "http"))
    assert list(http["output_text"]) == list(local["output_text"])
    assert set(local["finish_reason"]) == {"stop", "length"}  # both ends are exercised
    assert list(http["finish_reason"]) == list(local["finish_reason"])
    for h, e in zip(http.to_dict("records"), local.to_dict("records")):
        assert list(h["tokens_per_emission"]) == list(e["tokens_per_emission"]) == [1] * e["num_output_tokens"]
        assert h["tpot_s"] == pytest.approx((h["e2e_s"] - h["ttft_s"]) / (h["num_output_tokens"] - 1))
    cells = [pd.read_parquet(tmp_path / side / "cells.parquet").iloc[0] for side in ("local", "http")]
    assert [c["tokens_per_emission"] for c in cells] == [1.0, 1.0]
    assert [c["num_anomalies"] for c in cells] == [0, 0]
