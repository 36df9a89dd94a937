"""`specbench sweep --workload speed_bench` on a tiny model over a synthetic local SPEED-Bench copy: per-category
rows, multi-turn replay, split/category selection; schema errors end in one line before anything is written."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from specbench.compare import acceptance_by_category, load_run
from tests.support.cli_run import run_main
from tests.support.speed_bench_files import ARROW_SCHEMA, QUALITATIVE_ROWS, row, write_parquet, write_snapshot

COMMON = ["--device", "cpu", "--kv-cache-gb", "0.02", "--max-tokens", "4", "--warmup", "0", "--quiet",
          "--no-chat-template"]


def test_sweep_over_a_local_copy_records_each_category(tiny_model_dir, tmp_path):
    from specbench.cli.app import app

    root = write_snapshot(tmp_path / "speed")
    args = ["sweep", "--target", str(tiny_model_dir), "--workload", "speed_bench", "--speed-bench-data", str(root),
            "--speed-bench-categories", "coding,math", "--method", "ngram", "-k", "0,2", "-c", "2",
            "--num-prompts", "0", "--results-dir", str(tmp_path / "res"), "--run-id", "sb", *COMMON]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "per sampling mode and category" in result.output and "coding" in result.output
    run = tmp_path / "res" / "sb"
    requests = pd.read_parquet(run / "requests.parquet")
    # 2 cells x (q1, q3, q4 one turn + q2 two turns); writing is not selected
    assert len(requests) == 2 * 5 and set(requests["category"]) == {"coding", "math"}
    assert set(requests.loc[requests["sample_id"] == "q2", "turn"]) == {0, 1}
    assert set(requests["subcategory"]) == {"coding-sub", "math-sub"}
    categories = pd.read_parquet(run / "categories.parquet")
    assert sorted(categories["category"]) == ["coding", "coding", "math", "math"]
    by_category = acceptance_by_category(load_run(run))
    assert set(by_category["category"]) == {"coding", "math"}
    manifest = load_run(run).manifest
    assert manifest["config"]["speed_bench_categories"] == ["coding", "math"]
    assert manifest["workload"]["name"] == "speed_bench" and manifest["workload"]["data_sha256"]


@pytest.mark.parametrize(
    ("make", "extra", "message"),
    [
        (lambda d: write_parquet(d / "test.parquet", [{k: v for k, v in row("q1", "math", "x").items()
                                                      if k != "category"}],
                                 pa.schema([f for f in ARROW_SCHEMA if f.name != "category"])),
         (), "error: {path}: missing column 'category' (expected a string (the row's category))"),
        (lambda d: write_parquet(d / "test.parquet", [row("q1", "cooking", "x")]),
         (), "error: {path} row 1: field 'category' is 'cooking', expected one of the qualitative split's"),
        (lambda d: write_snapshot(d / "speed"), ("--speed-bench-split", "throughput_64k"),
         "error: --speed-bench-split: unknown split 'throughput_64k'; supported: qualitative, throughput_1k"),
        (lambda d: write_snapshot(d / "speed"), ("--speed-bench-categories", "math,,coding"),
         "error: --speed-bench-categories: empty value in 'math,,coding'"),
    ],
    ids=["missing-column", "unknown-category", "unknown-split", "empty-category"],
)
def test_schema_errors_are_one_line_and_write_nothing(tiny_model_dir, tmp_path, make, extra, message):
    path = make(tmp_path)
    result = run_main("sweep", "--target", str(tiny_model_dir), "--workload", "speed_bench", "--speed-bench-data",
                      str(path), "--results-dir", str(tmp_path / "res"), *extra, *COMMON)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert result.stderr.startswith(message.format(path=path)), result.stderr
    assert not (tmp_path / "res").exists()


def test_speed_bench_options_belong_to_speed_bench(tiny_model_dir, tmp_path):
    write_parquet(tmp_path / "q.parquet", QUALITATIVE_ROWS)
    result = run_main("sweep", "--target", str(tiny_model_dir), "--workload", "mt_bench", "--speed-bench-split",
                      "qualitative", "--results-dir", str(tmp_path / "res"), *COMMON)
    assert result.exit_code == 2 and "workload 'mt_bench' has no option(s) split" in result.stderr
