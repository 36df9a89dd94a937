"""compare, plot and the notebook on two real tiny-model sweeps (same target, a better and a worse draft)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench.compare.cell_estimates import RunEstimates
from specbench.compare.loading import load_run
from specbench.compare.matching import cell_ids_by_key
from specbench.compare.metrics_catalog import SPEEDUP, Resampling, catalog
from tests.support.tiny_models import data_dir, derive_draft

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "compare_runs.ipynb"
NUM_SAMPLES = 6
GOODPUT = "ttft:60000,tpot:150"  # generous TTFT; the TPOT bound splits the requests of a slow CPU run


def _sweep(results: Path, target: Path, draft: Path, label: str) -> None:
    from specbench.cli.app import app

    args = ["sweep", "--target", str(target), "--method", "draft", "--draft", str(draft), "--concurrency", "1,2",
            "--temperature", "0", "--num-steps", "0,2", "--data-dir", str(data_dir()), "--limit", str(NUM_SAMPLES),
            "--shots", "1", "--max-tokens", "8", "--warmup", "0", "--device", "cpu", "--kv-cache-gb", "0.02",
            "--results-dir", str(results), "--label", label, "--run-id", label, "--quiet",
            "--goodput", GOODPUT]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def results(tiny_model_dir, tiny_draft_dir, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    worse_draft = derive_draft(tiny_model_dir, tmp_path_factory.mktemp("worse_draft"), noise=0.4, seed=2)
    _sweep(root, tiny_model_dir, tiny_draft_dir, "before")
    _sweep(root, tiny_model_dir, worse_draft, "after")
    return root


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    from specbench.cli.app import main

    monkeypatch.setattr(sys, "argv", ["specbench", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.slow
def test_compare_gates_on_real_runs(results, tmp_path, monkeypatch, capsys):
    """Greedy speculative decoding is lossless: a draft change cannot move accuracy or agreement at temperature 0."""
    args = ["compare", "before", "after", "--results-dir", str(results), "--resamples", "300",
            "--output", str(tmp_path / "cmp.json"), "--fail-on", "regressed:accuracy,agreement",
            "--plots", str(tmp_path / "plots")]
    code, out, err = _main(args, monkeypatch, capsys)
    assert code == 0, err
    assert len(list((tmp_path / "plots").glob("*.png"))) == 9
    for name in ("goodput_vs_concurrency", "pareto_throughput_per_user", "speedup_vs_concurrency"):
        assert (tmp_path / "plots" / f"{name}.png").is_file()
    assert "differs: draft_model:" in out and "WARNING" not in err  # the draft is the change under test
    doc = json.loads((tmp_path / "cmp.json").read_text())
    assert not doc["unmatched"]["only_before"] and not doc["unmatched"]["only_after"]
    rows = doc["rows"]
    assert {r["concurrency"] for r in rows} == {1, 2} and {r["num_steps"] for r in rows} == {0, 2}
    for row in rows:
        if row["metric"].startswith(("accuracy_", "agreement_")):
            assert row["delta"] == 0 and row["verdict"] == "within noise" and row["num_before"] == NUM_SAMPLES
    acceptance = [r for r in rows if r["metric"] == "acceptance_length"]
    assert len(acceptance) == 2 and all(r["after"] < r["before"] for r in acceptance)  # the noisier draft
    # One run a side: speed metrics get the request bootstrap for reference, but no verdict.
    speed = [r for r in rows if r["noise_basis"] == "runs"]
    assert {r["verdict"] for r in speed} == {"no run-to-run estimate"} and all(r["ci_low"] is None for r in speed)
    assert all(r["ci_bootstrap_low"] is not None for r in rows if r["metric"] == "output_throughput")
    goodput = [r for r in rows if r["metric"] in ("request_goodput", "good_request_fraction")]
    assert len(goodput) == 8 and all(r in speed for r in goodput)


def test_estimators_reproduce_the_sweep_cells(results):
    run = load_run(results / "before")
    estimates = RunEstimates(run, "before", 100, 0)
    cells = run.cells.set_index("cell_id")
    columns = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2e": "e2e_s"}
    for key, repeats in cell_ids_by_key(run.cells).items():
        (cell_id,) = repeats.values()
        for metric in catalog(2) + (SPEEDUP,):
            if metric.needs_drafts and key.num_steps == 0:
                continue
            head, _, stat = metric.name.rpartition("_")
            column = metric.name.replace("accept_pos", "accept_rate_pos")
            column = f"{columns[head]}_{stat}" if head in columns else column
            if metric.resampling is Resampling.PAIRED:
                value, _ = estimates.outcomes(metric, key)
            else:
                value = estimates.estimate(metric, key).point
            if metric.group == "tree":  # the sweep drafted chains: N/A in the cell and in compare alike
                assert value is None and math.isnan(cells.loc[cell_id, metric.column]), (cell_id, metric.name)
                continue
            assert value == pytest.approx(cells.loc[cell_id, column], rel=1e-9), (cell_id, metric.name)


@pytest.mark.slow  # several seconds on 2 cores: the fast suite stays under 5 minutes
def test_notebook_runs_headless_against_the_sweeps(results, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    monkeypatch.setenv("SPECBENCH_BEFORE", "before")
    monkeypatch.setenv("SPECBENCH_AFTER", "after")
    monkeypatch.setenv("SPECBENCH_RESULTS_DIR", str(results))
    monkeypatch.setenv("SPECBENCH_RESAMPLES", "200")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()  # raises on a failing cell
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    markdown = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert any("| Metric | Before (c=1) | After (c=1) | Delta |" in m for m in markdown)
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 9  # goodput, Pareto and speedup figures included
    assert any("| Goodput (req/s)" in m for m in markdown)
    html = [o["data"].get("text/html", "") for o in outputs if "data" in o]
    assert any("best_num_steps" in h and "is_distinguishable" in h for h in html)
    assert any("changed their flexible-extract answer" in o.get("text", "") for o in outputs)
