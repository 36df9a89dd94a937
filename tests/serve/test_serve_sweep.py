"""`specbench serve` + `sweep --backend openai` against it, checked against the same sweep in-process: greedy
texts, token counts and acceptance (from /metrics deltas) agree; the API key never reaches disk or output."""

from __future__ import annotations

import json
import sys

import httpx
import pandas as pd
import pytest

# The serving stack is a dependency of specbench, but the GPU image lacks it: skip there, run in CI.
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from typer.testing import CliRunner

from tests.support.tiny_models import data_dir

SECRET = "sk-test-do-not-store-1234567890"
K = 2
COMMON = ["--method", "draft", "--num-steps", str(K), "--no-speedup", "--data-dir",
          str(data_dir()), "--warmup", "1", "--quiet"]
RUNS = {  # workload args: gsm8k goes to /v1/completions, mt_bench (chat template, 2 turns) to /v1/chat/completions
    # temperature 1: seeded sampling must reproduce too (seed, temperature and top_p reach the server's engine)
    "gsm8k": ["--workload", "gsm8k", "--limit", "3", "--shots", "1", "--max-tokens", "8", "--concurrency", "1,2",
              "--temperature", "0,1"],
    "mt": ["--workload", "mt_bench", "--limit", "2", "--max-tokens", "6", "--concurrency", "1", "--temperature", "0"],
}


def _cli(args: list[str], env: dict | None = None):
    from specbench.cli.app import app

    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1", **(env or {})}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def server(tiny_model_dir, tiny_draft_dir, monkeypatch_module):
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig, start_server

    monkeypatch_module.setenv("SPECBENCH_TEST_KEY", SECRET)
    engine = EngineConfig(target=str(tiny_model_dir), method="draft", draft=str(tiny_draft_dir), max_num_steps=K,
                          device="cpu", kv_cache_gb=0.02)
    with start_server(ServeConfig(engine, served_model_name="tiny", api_key_env="SPECBENCH_TEST_KEY")) as running:
        yield running


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def runs(server, tiny_model_dir, tiny_draft_dir, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    outputs = {}
    for name, args in RUNS.items():
        _cli(["sweep", "--target", str(tiny_model_dir), "--draft", str(tiny_draft_dir), "--device", "cpu",
              "--kv-cache-gb", "0.02", "--results-dir", str(results), "--run-id", f"{name}-local", *COMMON, *args])
        outputs[name] = _cli(["sweep", "--backend", "openai", "--base-url", server.url + "/v1",
                              "--api-key-env", "SPECBENCH_TEST_KEY", "--results-dir", str(results),
                              "--run-id", f"{name}-http", *COMMON, *args], env={"SPECBENCH_TEST_KEY": SECRET}).output
    return results, outputs


def _tables(results, name: str, table: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    key = ["cell_id", "sample_id", "turn"] if table == "requests" else ["cell_id"]
    local, http = (pd.read_parquet(results / f"{name}-{side}" / f"{table}.parquet") for side in ("local", "http"))
    return local.sort_values(key).reset_index(drop=True), http.sort_values(key).reset_index(drop=True)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_greedy_texts_and_token_counts_match_the_in_process_sweep(runs, name):
    local, http = _tables(runs[0], name, "requests")
    assert len(http) == len(local) > 0 and http["error"].isna().all()
    assert list(http["output_text"]) == list(local["output_text"])
    assert list(http["num_output_tokens"]) == list(local["num_output_tokens"])
    assert list(http["num_prompt_tokens"]) == list(local["num_prompt_tokens"])  # from the server's usage
    assert (http["token_count_source"] == "server_per_chunk").all() and http["is_usage_reported"].all()
    assert (http["tokens_per_emission"].map(sum) == http["num_output_tokens"]).all()
    assert (http["num_anomalies"] == 0).all()  # an honest server: its reports pass every sanity check
    # one end and one emission per engine step, held-back text included (the server reports each step's tokens)
    assert [list(t) for t in http["tokens_per_emission"]] == [list(t) for t in local["tokens_per_emission"]]
    assert http["num_draft_rounds"].isna().all() and http["num_accepted_per_pos"].isna().all()
    if name == "mt":  # turn 2 was asked with the model's own turn-1 answer, on both sides
        assert set(http["turn"]) == {0, 1}
        # and started on turn 1's cached blocks: the server's usage says how many, as the engine's own record does
        assert list(http["num_cached_prompt_tokens"]) == list(local["num_cached_prompt_tokens"])
        assert (local.loc[local["turn"] == 1, "num_cached_prompt_tokens"] > 0).all()


def test_the_server_batches_concurrent_requests(runs):
    local, http = _tables(runs[0], "gsm8k", "requests")
    cell = http[http["cell_id"] == "r0-t0-c2-k2"].sort_values("request_index")
    first, second = cell.iloc[0], cell.iloc[1]
    assert second["arrival_time"] < first["finish_time"]  # two requests in flight at once


@pytest.mark.parametrize("name", sorted(RUNS))
def test_acceptance_from_metrics_deltas_equals_in_process_counts(runs, name):
    local, http = _tables(runs[0], name, "cells")
    assert (http["acceptance_source"] == "server:specbench").all() and (local["acceptance_source"] == "engine").all()
    for column in ("num_draft_rounds", "num_draft_tokens", "num_accepted_tokens", "num_output_tokens"):
        assert list(http[column]) == list(local[column]), column
    assert (local["num_draft_rounds"] > 0).all()
    for column in ("acceptance_rate", "acceptance_length", *(f"accept_rate_pos_{k}" for k in range(1, K + 1))):
        assert http[column].to_numpy() == pytest.approx(local[column].to_numpy()), column
    assert (http["server_generation_tokens"] == http["num_output_tokens"]).all()  # no other traffic in the window
    assert http["is_acceptance_consistent"].all() and http["acceptance_length_per_request"].isna().all()
    assert (http["backend"] == "openai").all() and (http["num_errors"] == 0).all()
    assert (http["num_anomalies"] == 0).all() and (local["num_anomalies"] == 0).all()
    # Latency recomputed from the client's records (acceptance from /metrics is per cell: not rechecked)
    assert http["is_metrics_consistent"].eq(True).all() and local["is_metrics_consistent"].eq(True).all()


def test_manifest_records_the_server_and_never_the_key(runs, server):
    results, outputs = runs
    manifest = json.loads((results / "gsm8k-http" / "manifest.json").read_text())
    assert manifest["backend"]["server"]["model"] == "tiny" and manifest["backend"]["base_url"] == server.url
    assert manifest["backend"]["server"]["version"]["server"] == "specbench"
    assert manifest["backend"]["api_key_env"] == "SPECBENCH_TEST_KEY"
    assert "note: acceptance from: server:specbench" in outputs["gsm8k"]
    for path in results.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert not any(SECRET in out for out in outputs.values())


def test_server_refuses_a_missing_key_and_bad_requests(server):
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/v1/models").status_code == 401
        assert client.get("/health").json() == {"status": "ok"}
        headers = {"Authorization": f"Bearer {SECRET}"}
        bad = client.post("/v1/completions", json={"prompt": "hi", "n": 2}, headers=headers)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "n"
        other = client.post("/v1/completions", json={"model": "nope", "prompt": "hi"}, headers=headers)
        assert other.status_code == 404
        whole = client.post("/v1/completions", headers=headers, json={
            "prompt": "Question: 1 + 1?\nAnswer:", "max_tokens": 5, "temperature": 0, "seed": 1})
        body = whole.json()
        assert whole.status_code == 200 and body["usage"]["completion_tokens"] == 5
        assert body["choices"][0]["finish_reason"] == "length"


def test_compare_reads_an_http_run(runs, monkeypatch, capsys):
    from specbench.cli.app import main

    results = runs[0]
    monkeypatch.setattr(sys, "argv", ["specbench", "compare", str(results / "gsm8k-local"),
                                      str(results / "gsm8k-http"), "--resamples", "100"])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr().out
    assert code == 0, out
    acceptance = next(line for line in out.splitlines() if line.startswith("Acceptance Length"))
    assert acceptance.count("N/A") <= 1, acceptance  # values on both sides; at most the verdict is N/A


def test_http_acceptance_on_both_sides_of_compare_and_in_the_plots(runs):
    """/metrics deltas are per cell: compare shows them as point values (one repeat: no interval), equal to the
    embedded run's on the same prompts; the acceptance figure's data has the HTTP run too."""
    from specbench.compare import CompareOptions, compare_runs, load_run
    from specbench.compare.plot_data import run_series

    local, http = (load_run(runs[0] / f"gsm8k-{side}") for side in ("local", "http"))
    comparison = compare_runs(local, http, CompareOptions(metrics=("acceptance",), num_resamples=100))
    rows = [r for r in comparison.rows if r.metric.name in ("acceptance_length", "acceptance_rate", "accept_pos_1")]
    assert len(rows) == 3 * len(comparison.matching.matched) > 0
    for row in rows:
        assert row.before is not None and row.after == pytest.approx(row.before), row
        assert row.interval is None  # the HTTP side has one value per cell and a single repeat
    series = {s.label: s.acceptance for s in run_series([local, http])}
    assert len(series) == 2 and all(len(frame) == 2 for frame in series.values())  # temperatures 0 and 1
    frames = list(series.values())
    for column in ("acceptance_length", "accept_rate_pos_1", f"accept_rate_pos_{K}"):
        assert frames[1][column].to_numpy() == pytest.approx(frames[0][column].to_numpy()), column


def test_a_drafting_server_swept_without_method_is_labelled_and_never_its_own_baseline(runs, server):
    """No --method/-k: the grid's one cell is k=0, but the server's counters move, so the cell takes the
    server's method and k from its /version and gets no speedup or agreement vs itself."""
    results = runs[0]
    out = _cli(["sweep", "--backend", "openai", "--base-url", server.url, "--api-key-env", "SPECBENCH_TEST_KEY",
                "--results-dir", str(results), "--run-id", "drafting", "--data-dir", str(data_dir()),
                "--workload", "gsm8k", "--limit", "2", "--shots", "1", "--max-tokens", "8", "--concurrency", "1",
                "--temperature", "0", "--warmup", "0"], env={"SPECBENCH_TEST_KEY": SECRET}).output
    cell = pd.read_parquet(results / "drafting" / "cells.parquet").iloc[0]
    assert cell["cell_id"].endswith("-k0") and cell["num_draft_rounds"] > 0
    assert (cell["method"], cell["num_steps"]) == ("draft", K)
    assert "method: draft (from /version)" in cell["drafting_note"] and f"k: {K} (from /version)" in out
    assert pd.isna(cell["speedup"]) and pd.isna(cell["agreement_text"]) and pd.isna(cell["baseline_cell_id"])
    assert "Speedup vs k=0 1.000" not in out and "Same text as k=0 1.000" not in out
    assert "method draft |" in out and "it is no baseline" in out
    manifest = json.loads((results / "drafting" / "manifest.json").read_text())
    assert manifest["backend"]["server"]["speculative"] == {"method": "draft", "num_steps": K, "source": "/version"}
    requests = pd.read_parquet(results / "drafting" / "requests.parquet")
    assert (requests["num_steps"] == K).all() and (requests["method"] == "draft").all()
