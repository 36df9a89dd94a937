"""`specbench sweep` end to end through the CLI on a tiny model: schema, recomputed metrics, resume, user errors."""

from __future__ import annotations

import hashlib
import json
import math
import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from specbench.bench.summary_table import format_summary
from specbench.runs.records import cell_metrics_from_rows
from specbench.runs.schema import TABLES, arrow_schema
from tests.support.tiny_models import data_dir
from tests.support.cli_run import main_exit

GRID = ["--concurrency", "1,3", "--temperature", "0,1", "--num-steps", "0,2"]
NUM_SAMPLES, MAX_K = 3, 2


def _sweep_args(target, draft, results_dir, *extra: str) -> list[str]:
    return ["sweep", "--target", str(target), "--method", "draft", "--draft", str(draft), *GRID,
            "--data-dir", str(data_dir()), "--limit", str(NUM_SAMPLES), "--shots", "1", "--max-tokens", "6",
            "--warmup", "1", "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(results_dir),
            "--label", "before", "--quiet", *extra]


def _cli(args: list[str]):
    from specbench.cli.app import app

    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def run_dir(tiny_model_dir, tiny_draft_dir, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    result = _cli(_sweep_args(tiny_model_dir, tiny_draft_dir, results, "--run-id", "grid"))
    assert "8 cells run" in result.output and "c=3 k=2" in result.output
    assert "(llama 2L h" in result.output and "full attention)" in result.output  # the target, in words
    return results / "grid"


def test_writes_every_table_with_the_documented_schema(run_dir):
    for table in TABLES:
        schema = pq.read_schema(run_dir / f"{table}.parquet").remove_metadata()
        assert schema.equals(arrow_schema(table, MAX_K)), table
        parts = pd.read_parquet(run_dir / "parts" / table)
        assert parts["cell_id"].nunique() == 8
    cells = pd.read_parquet(run_dir / "cells.parquet")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert len(cells) == 8 and cells["cell_id"].is_unique
    assert set(zip(cells["concurrency"], cells["temperature"], cells["num_steps"])) == {
        (c, t, k) for c in (1, 3) for t in (0.0, 1.0) for k in (0, 2)}
    assert len(requests) == 8 * NUM_SAMPLES and (requests["label"] == "before").all()
    assert (cells["num_warmup"] == 1).all() and not requests["request_id"].str.startswith("warmup").any()
    assert not (run_dir / ".tmp").exists()


def test_manifest_records_models_data_and_config(run_dir, tiny_model_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    weights = hashlib.sha256((tiny_model_dir / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["models"]["target"]["weights_sha256"] == weights
    architecture = manifest["models"]["target"]["architecture"]
    assert architecture["architecture"] == "llama" and architecture["num_layers"] == 2
    assert architecture["num_experts"] == 0 and architecture["num_params"] == architecture["num_active_params"]
    for data_file in manifest["workload"]["data_files"]:
        assert data_file["sha256"] == hashlib.sha256((data_dir() / data_file["name"]).read_bytes()).hexdigest()
    assert manifest["config"]["concurrency"] == [1, 3] and manifest["config"]["label"] == "before"
    assert manifest["proposer"]["method"] == "draft" and manifest["engine_config"]["max_concurrency"] == 3
    assert manifest["versions"]["torch"] and manifest["device"]["type"] == "cpu"
    assert len(manifest["cells"]) == 8 and manifest["sampling"]["max_tokens"] == 6


def test_cell_metrics_recompute_from_requests(run_dir):
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("cell_id")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    for cell_id, group in requests.groupby("cell_id"):
        rows = [row for _, row in group.iterrows()]
        recomputed = cell_metrics_from_rows(rows).to_row(MAX_K)
        stored = cells.loc[cell_id]
        for name, value in recomputed.items():
            if value is None or (isinstance(value, float) and math.isnan(value)):
                assert pd.isna(stored[name]), (cell_id, name)
            else:
                assert stored[name] == pytest.approx(value), (cell_id, name)
        # And by hand, from the raw columns alone.
        window = max(t[-1] for t in group["emission_times"]) - group["arrival_time"].min()
        assert stored["output_throughput"] == pytest.approx(group["num_output_tokens"].sum() / window)
        rounds = group["num_draft_rounds"].sum()
        if rounds:
            assert stored["acceptance_length"] == pytest.approx(1 + group["num_accepted_tokens"].sum() / rounds)
        assert (group["num_output_tokens"] == group["tokens_per_emission"].map(sum)).all()


def test_every_cell_passes_its_independent_recomputation(run_dir):
    cells = pd.read_parquet(run_dir / "cells.parquet")
    assert cells["is_metrics_consistent"].eq(True).all() and cells["metrics_mismatch"].isna().all()
    assert (cells["num_steps"] > 0).sum() == 4 and (cells.loc[cells["num_steps"] > 0, "num_draft_rounds"] > 0).all()


def test_an_acceptance_accounting_bug_fails_the_cell_and_warns(tiny_model_dir, tiny_draft_dir, tmp_path,
                                                                monkeypatch):
    """AL reported as A / D (the +1 dropped): the recomputation disagrees, the cell is flagged, the summary warns."""
    from specbench.metrics.cell_metrics import CellMetrics

    original = CellMetrics.to_row

    def buggy(self, num_positions=None):
        row = original(self, num_positions)
        row["acceptance_length"] -= 1.0
        return row

    monkeypatch.setattr(CellMetrics, "to_row", buggy)
    args = ["sweep", "--target", str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir),
            "--num-steps", "2", "--data-dir", str(data_dir()), "--limit", "2", "--shots", "1", "--max-tokens", "4",
            "--warmup", "0", "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path),
            "--run-id", "bug", "--quiet"]
    output = _cli(args).output
    cells = pd.read_parquet(tmp_path / "bug" / "cells.parquet")
    assert sorted(cells["num_steps"]) == [0, 2] and not cells["is_metrics_consistent"].any()  # k = 0 too: AL 0
    for _, cell in cells.iterrows():
        al = cell["acceptance_length"]
        assert cell["metrics_mismatch"] == f"acceptance_length {al:.6g} vs recomputed {al + 1:.6g}"
        assert f"WARNING: cell {cell['cell_id']}: metrics disagree" in output
    assert "METRICS INCONSISTENT in 2 cells" in output.splitlines()[0]


def test_comparisons_with_the_baseline_cell(run_dir):
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("cell_id")
    for cell_id, row in cells.iterrows():
        baseline = cells.loc[row["baseline_cell_id"]]
        assert baseline["num_steps"] == 0 and baseline["concurrency"] == row["concurrency"]
        assert row["speedup"] == pytest.approx(row["output_throughput"] / baseline["output_throughput"])
        assert row["accuracy_n"] == NUM_SAMPLES and row["agreement_num_pairs"] == NUM_SAMPLES
        if row["temperature"] == 0:
            assert row["agreement_text"] == 1.0, cell_id  # greedy speculative decoding is lossless
        if row["num_steps"] > 0:
            assert row["num_draft_rounds"] > 0 and row["is_acceptance_consistent"]
    summary = format_summary(pq.read_table(run_dir / "cells.parquet").to_pylist(), width=200)
    assert "Accuracy strict-match" in summary and "c=3 k=2" in summary


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_resume_runs_exactly_the_missing_cells(run_dir, tiny_model_dir, tiny_draft_dir, tmp_path):
    copy = tmp_path / "grid"
    shutil.copytree(run_dir, copy)
    before = pd.read_parquet(copy / "cells.parquet").set_index("cell_id")["start_unix_s"]
    missing = "r0-t1-c3-k2"
    (copy / "parts" / "cells" / f"{missing}.parquet").unlink()  # as if killed before its cells part landed
    (copy / "parts" / "steps" / f"{missing}.parquet").unlink()
    result = _cli(["sweep", "--resume", str(copy), "--quiet"])
    assert "1 cells run, 7 already complete" in result.output
    after = pd.read_parquet(copy / "cells.parquet").set_index("cell_id")["start_unix_s"]
    assert sorted(after.index) == sorted(before.index)
    changed = {cell_id for cell_id in before.index if after[cell_id] != before[cell_id]}
    assert changed == {missing}
    requests = pd.read_parquet(copy / "requests.parquet")
    assert len(requests) == 8 * NUM_SAMPLES and (requests["cell_id"] == missing).sum() == NUM_SAMPLES
    assert pd.read_parquet(copy / "steps.parquet")["cell_id"].nunique() == 8

    # Complete: nothing left to run. A different explicit config is refused.
    assert "0 cells run, 8 already complete" in _cli(["sweep", "--resume", str(copy), "--quiet"]).output
    args = _sweep_args(tiny_model_dir, tiny_draft_dir, tmp_path, "--resume", str(copy))
    assert "0 cells run" in _cli(args).output  # the original command line plus --resume is accepted


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str]:
    code, _, err = main_exit(args, monkeypatch, capsys)
    return code, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--data-dir", "/nonexistent/data"], "data directory '/nonexistent/data' (from --data-dir) does not exist"),
        (["--concurrency", "0"], "--concurrency must be >= 1, got 0"),
        (["--workload", "bogus"], "unknown workload 'bogus'"),
        (["--temperature", "warm"], "--temperature: 'warm' is not a number"),
        (["--method", "none", "--num-steps", "2"], "needs a speculative --method"),
        (["--shots", "2", "--workload", "mt_bench"], "workload 'mt_bench' has no option(s) num_shots"),
        (["--target", "/nonexistent/model"], "/nonexistent/model"),
        (["--results-dir", "{file}/results"], "is not a directory"),
        (["--resume", "{tmp}"], "not a specbench run directory"),
    ],
)
def test_user_errors_exit_2_with_one_line_and_write_nothing(args, message, tiny_model_dir, tmp_path, monkeypatch,
                                                            capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    args = [a.format(file=blocker, tmp=tmp_path) for a in args]
    results = tmp_path / "results"
    base = ["sweep", "--target", str(tiny_model_dir), "--device", "cpu", "--data-dir", str(data_dir()),
            "--limit", "1", "--max-tokens", "2", "--results-dir", str(results), "--quiet"]
    code, err = _main(base + args, monkeypatch, capsys)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert err.strip().count("\n") == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no results dir, no run dir, no parts


def test_mtbench_preset_asks_turn_two_after_turn_one(tiny_model_dir, tmp_path):
    result = _cli(["mtbench", "--target", str(tiny_model_dir), "--method", "ngram", "--num-steps", "2",
                   "--data-dir", str(data_dir()), "--limit", "12", "--max-tokens", "4", "--concurrency", "4",
                   "--device", "cpu", "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path), "--run-id", "mt",
                   "--warmup", "0", "--quiet"])
    assert "per sampling mode and category" in result.output and "roleplay" in result.output
    # greedy and sampled categories apart, with counts: the summary's pooled agreement is flagged as such
    assert "greedy (t=0)" in result.output and "sampled (t>0)" in result.output, result.output
    assert "the summary's agreement rows pool both" in result.output, result.output
    requests = pd.read_parquet(tmp_path / "mt" / "requests.parquet")
    assert len(requests) == 2 * 12 * 2  # 2 cells x 12 questions x 2 turns
    assert requests["temperature"].isna().all()  # FastChat's per-category temperatures
    assert set(requests.loc[requests["category"] == "writing", "request_temperature"]) == {0.7}
    for _, pair in requests.groupby(["cell_id", "sample_id"]):
        first, second = pair.sort_values("turn").itertuples()
        assert second.request_index > first.request_index and second.arrival_time >= first.finish_time
        # Turn 2 carries the question, turn 1 and the model's own answer.
        assert second.num_prompt_tokens > first.num_prompt_tokens + first.num_output_tokens - 1
    categories = pd.read_parquet(tmp_path / "mt" / "categories.parquet")
    # --limit 12 draws from every one of MT-Bench's 8 categories (not the first 12: writing and roleplay)
    assert categories["category"].nunique() == 8 and len(categories) == 2 * 8


def test_random_workload_warns_and_keeps_fixed_lengths(tiny_model_dir, tmp_path):
    from specbench.workloads.random_tokens import RandomTokensWarning

    with pytest.warns(RandomTokensWarning):
        _cli(["sweep", "--workload", "random", "--target", str(tiny_model_dir), "--limit", "3", "--input-len", "16",
              "--output-len", "5", "--concurrency", "2", "--request-rate", "50", "--device", "cpu",
              "--kv-cache-gb", "0.02", "--results-dir", str(tmp_path), "--run-id", "rnd", "--warmup", "0", "--quiet"])
    requests = pd.read_parquet(tmp_path / "rnd" / "requests.parquet")
    assert (requests["num_prompt_tokens"] == 16).all() and (requests["num_output_tokens"] == 5).all()
    assert requests["scheduled_time"].notna().all()  # Poisson arrivals at 50/s
    assert (requests["arrival_time"] >= requests["scheduled_time"]).all()
