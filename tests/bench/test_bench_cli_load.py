"""`specbench sweep` on the embedded engine with a user prompt file, --goodput, best-k recommendations, the
prefix-cache record, and a duration-bounded ramp; malformed files end in one error line."""

from __future__ import annotations

import hashlib
import json
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from specbench.bench.recommend import RECOMMENDATIONS, write_recommendations
from specbench.runs.schema import RECOMMENDATION_COLUMNS

ROWS = [
    {"prompt": "The capital of France is", "category": "geo", "max_tokens": 3},
    {"prompt": "Once upon a time", "category": "story"},
    {"messages": [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "ignored"},
                  {"role": "user", "content": "And then?"}], "category": "story"},
]
COMMON = ["--device", "cpu", "--kv-cache-gb", "0.02", "--max-tokens", "4", "--quiet", "--no-chat-template"]


def _cli(args: list[str]):
    from specbench.cli.app import app

    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


@pytest.fixture(scope="module")
def file_run(tiny_model_dir, tiny_draft_dir, prompt_file, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    output = _cli(["sweep", "--target", str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir),
                   "--workload", f"file:{prompt_file}", "-k", "0,2", "-c", "1,2", "--warmup", "1",
                   "--goodput", "ttft:60000", "--goodput", "tpot:200", "--results-dir", str(results),
                   "--run-id", "file", *COMMON])
    return results / "file", output


def test_prompt_file_runs_with_categories_turns_and_the_data_hash(file_run, prompt_file):
    run_dir, output = file_run
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert set(requests["category"]) == {"geo", "story"} and set(requests["turn"]) == {0, 1}
    assert len(requests) == 4 * 4  # 4 cells x (2 one-turn rows + 2 turns of the conversation)
    assert (requests.loc[requests["category"] == "geo", "max_tokens"] == 4).all()  # --max-tokens wins
    categories = pd.read_parquet(run_dir / "categories.parquet")
    assert set(categories["category"]) == {"geo", "story"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (data_file,) = manifest["workload"]["data_files"]
    assert data_file["sha256"] == hashlib.sha256(prompt_file.read_bytes()).hexdigest()
    assert manifest["workload"]["data_source"] == f"file:{prompt_file}" and manifest["workload"]["data_sha256"]
    assert "per sampling mode and category" in output and "story" in output


def test_goodput_columns_follow_the_requests(file_run):
    run_dir, output = file_run
    cells = pd.read_parquet(run_dir / "cells.parquet")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert (cells["goodput_slo"] == "ttft:60000,tpot:200").all()
    for _, cell in cells.iterrows():
        rows = requests[requests["cell_id"] == cell["cell_id"]]
        good = rows[rows["is_good"]]
        expected = (rows["ttft_s"] <= 60.0) & (rows["tpot_s"].isna() | (rows["tpot_s"] <= 0.2))
        assert list(rows["is_good"]) == list(expected)
        assert cell["num_good_requests"] == len(good)
        assert cell["good_request_fraction"] == pytest.approx(len(good) / len(rows))
        assert cell["request_goodput"] == pytest.approx(len(good) / cell["duration_s"])
        assert cell["output_goodput"] == pytest.approx(good["num_output_tokens"].sum() / cell["duration_s"])
    assert "Goodput (req/s)" in output and "Good requests (%)" in output


def test_recommendations_table_and_summary(file_run):
    run_dir, output = file_run
    table = pq.read_table(run_dir / RECOMMENDATIONS)
    assert table.schema.names == [name for name, _, _ in RECOMMENDATION_COLUMNS]
    recs = table.to_pandas()
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index(["concurrency", "num_steps"])
    assert sorted(recs["concurrency"]) == [1, 2] and (recs["num_candidates"] == 2).all()
    for _, rec in recs.iterrows():
        best = cells.loc[(rec["concurrency"], rec["best_num_steps"]), "output_throughput"]
        other = cells.loc[(rec["concurrency"], rec["runner_up_num_steps"]), "output_throughput"]
        assert rec["best_value"] == pytest.approx(best) and best >= other
        assert rec["ratio"] == pytest.approx(best / other)
    assert "best num-steps per grid point" in output and "recommendations .parquet" in output
    assert not (run_dir / ".tmp").exists()
    by_tpot = write_recommendations(run_dir, "tpot")
    assert {r.metric for r in by_tpot} == {"tpot_median"}
    for r in by_tpot:
        assert r.best_value <= r.runner_up_value and r.ratio <= 1


def test_cells_record_the_cache_policy_and_the_load(file_run):
    run_dir, output = file_run
    cells = pd.read_parquet(run_dir / "cells.parquet")
    # the embedded engine caches prefixes: each cell starts on an empty cache, its hit rate read from the engine
    assert cells["is_cache_reset"].all() and cells["cache_reset_note"].str.contains("engine prefix cache cleared").all()
    assert cells["prefix_cache_source"].str.startswith("engine step stats").all()
    assert cells["duration_limit_s"].isna().all() and cells["ramp_up_strategy"].isna().all()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["prefix_caching"] is True and manifest["prefix_caching_note"] == "on"
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert not requests["request_id"].str.startswith("warmup").any() and (requests["category"] != "warmup").all()


def test_duration_bounded_linear_ramp(tiny_model_dir, prompt_file, tmp_path):
    _cli(["sweep", "--target", str(tiny_model_dir), "--workload", f"file:{prompt_file}", "-c", "4",
          "--method", "none", "--duration", "1.5", "--ramp-up-strategy", "linear", "--ramp-up-start-rps", "4", "--ramp-up-end-rps", "12",
          "--warmup", "0", "--no-cache-reset", "--reasoning-parser", "think", "--results-dir", str(tmp_path),
          "--run-id", "ramp", *COMMON])
    cells = pd.read_parquet(tmp_path / "ramp" / "cells.parquet")
    requests = pd.read_parquet(tmp_path / "ramp" / "requests.parquet")
    cell = cells.iloc[0]
    assert (cell["duration_limit_s"], cell["ramp_up_strategy"], cell["ramp_up_start_rps"], cell["ramp_up_end_rps"]) \
        == (1.5, "linear", 4.0, 12.0)
    assert not cell["is_cache_reset"] and cell["cache_reset_note"] == "skipped (--no-cache-reset)"
    first = requests[requests["turn"] == 0].sort_values("scheduled_time")
    offsets = first["scheduled_time"] - first["scheduled_time"].min()
    assert len(first) > len(ROWS) and offsets.max() < 1.5  # samples cycled, arrivals only within the duration
    assert first["request_id"].is_unique
    # the tiny model writes no <think> tags: nothing is split off, the answer is the whole text
    assert requests["reasoning_text"].isna().all() and requests["output_text"].notna().all()


def test_malformed_prompt_file_is_one_error_line(tmp_path, monkeypatch, capsys, tiny_model_dir):
    from specbench.cli.app import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"messages": [{"role": "user"}]}) + "\n")
    monkeypatch.setattr(sys, "argv", ["specbench", "sweep", "--target", str(tiny_model_dir), "--workload",
                                      f"file:{bad}", "--results-dir", str(tmp_path / "res"), *COMMON])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: malformed row in") and f"{bad} line 2: field 'messages[0].content'" in err
    assert not (tmp_path / "res").exists()


def test_duration_bounded_all_at_once(tiny_model_dir, prompt_file, tmp_path):
    """No arrival schedule: a first turn starts whenever a slot frees, until the duration has passed."""
    _cli(["sweep", "--target", str(tiny_model_dir), "--workload", f"file:{prompt_file}", "-c", "2", "--method", "none",
          "--duration", "1.0", "--warmup", "0", "--results-dir", str(tmp_path), "--run-id", "all", *COMMON])
    requests = pd.read_parquet(tmp_path / "all" / "requests.parquet")
    first = requests[requests["turn"] == 0]
    assert len(first) > len(ROWS) and first["scheduled_time"].isna().all()
    # A turn is admitted while the duration has not passed and stamped just after: on a loaded machine the stamp can
    # trail the admission check, so the bound has slack (without the duration, arrivals would never stop).
    assert first["arrival_time"].max() - first["arrival_time"].min() < 1.0 + 0.5
    assert requests["error"].isna().all() and pd.read_parquet(tmp_path / "all" / "cells.parquet").iloc[0][
        "duration_limit_s"] == 1.0
