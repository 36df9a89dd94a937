"""Draft tree shapes as sweep axes (--eagle-topk, --num-draft-tokens): the grid and its cell keys, the one-line
refusals, tables written before trees read as chains, and a sweep end to end on the tiny model (chains for real;
trees through a stand-in that lets the engine take the shape and hands back tree counts, as a tree proposer would:
the engine side is another branch's)."""

from __future__ import annotations

import dataclasses
import math
import shutil

import pandas as pd
import pytest
from typer.testing import CliRunner

from specbench.bench.grid import build_grid
from specbench.bench.summary_table import format_summary
from specbench.compare.matching import key_of
from specbench.config import EngineConfig
from specbench.runs.cell_key import CellKey, shape_text
from specbench.runs.sweep_config import SweepConfig
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.verify.tree_stats import TreeAcceptanceCounts
from tests.support.cli_run import main_exit
from tests.support.tiny_models import data_dir


def _config(**fields) -> SweepConfig:
    return SweepConfig(engine=EngineConfig(method="eagle3"), **fields)


def test_every_speculative_k_runs_every_shape_and_k0_only_the_chain():
    config = _config(num_steps=(2, 0), eagle_topk=(2, 1), num_draft_tokens=(6, 4), repeats=2)
    assert config.grid_draft_shapes == (DraftShape(1), DraftShape(2, 6), DraftShape(2, 4))
    ids = [key.cell_id for key in build_grid(config)]
    assert ids == ["r0-t0-c1-k0", "r0-t0-c1-k2", "r0-t0-c1-k2-top2-n6", "r0-t0-c1-k2-top2-n4",
                   "r1-t0-c1-k0", "r1-t0-c1-k2-top2-n4", "r1-t0-c1-k2-top2-n6", "r1-t0-c1-k2"]  # ABAB on repeats
    tree = build_grid(config)[2]
    assert tree.draft_shape == DraftShape(2, 6) and tree.baseline == CellKey(0, 0.0, 1, 0)
    no_budget = _config(num_steps=(0, 3), eagle_topk=(4,))
    assert [key.cell_id for key in build_grid(no_budget)] == ["r0-t0-c1-k0", "r0-t0-c1-k3-top4"]


def test_a_launched_server_serves_one_k_and_shape_at_a_time():
    config = _config(backend="openai", server_cmd="s --port {port}", num_steps=(1, 2), eagle_topk=(1, 2),
                     concurrency=(1, 4))
    groups = [(k.num_steps, k.eagle_topk) for k in build_grid(config)]
    assert groups == [(0, 1), (0, 1), (1, 1), (1, 1), (1, 2), (1, 2), (2, 1), (2, 1), (2, 2), (2, 2)]


def test_a_chain_takes_no_budget_and_k0_no_tree():
    with pytest.raises(ValueError, match="takes no draft_token_budget"):
        CellKey(0, 0.0, 1, 2, 1, 8)
    with pytest.raises(ValueError, match="num_steps 0 drafts nothing"):
        CellKey(0, 0.0, 1, 0, 2)


def test_tables_written_before_trees_read_as_chains():
    old = pd.Series({"workload": "gsm8k", "method": "draft", "num_steps": 3, "temperature": 0.0, "concurrency": 1})
    key = key_of(old)
    assert (key.eagle_topk, key.draft_token_budget, key.shape_text) == (1, 0, "")
    assert str(key) == ("MatchKey(workload='gsm8k', method='draft', num_steps=3, temperature=0.0, "
                        "concurrency=1)")  # the bootstrap seed text chain cells had before
    tree = key_of(pd.Series({**old, "eagle_topk": 4, "draft_token_budget": 16}))
    assert tree.shape_text == " top-4/16" and tree.baseline == dataclasses.replace(key, num_steps=0)
    assert shape_text({"num_steps": 3}) == "" and shape_text({"eagle_topk": 4, "draft_token_budget": None}) == " top-4"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "ngram", "--num-steps", "2", "--eagle-topk", "1,2"],
         ("error: --eagle-topk 1,2 (tree drafts) needs --method draft, eagle, eagle3, mtp; method 'ngram' drafts "
          "chains only")),
        (["--method", "none", "--num-steps", "0", "--eagle-topk", "4"], "(tree drafts) needs --method draft"),
        (["--method", "draft", "--num-steps", "2", "--num-draft-tokens", "8"],
         "error: --num-draft-tokens budgets tree drafts: give --eagle-topk above 1 too"),
        (["--method", "draft", "--num-steps", "2", "--eagle-topk", "0"], "error: --eagle-topk must be >= 1, got 0"),
        (["--method", "draft", "--num-steps", "2", "--eagle-topk", "2", "--num-draft-tokens", "0"],
         "error: --num-draft-tokens must be >= 1, got 0"),
        (["--method", "draft", "--num-steps", "0", "--no-speedup", "--eagle-topk", "2"],
         "needs a speculative --num-steps"),
        (["--backend", "openai", "--base-url", "http://127.0.0.1:9", "--method", "eagle3", "--num-steps", "3",
          "--eagle-topk", "1,4"], "the server's speculative config is fixed; give the one --eagle-topk"),
        (["--backend", "openai", "--server-cmd", "preset:llama-server", "--method", "draft", "--num-steps", "3",
          "--eagle-topk", "2"], ("error: --server-cmd preset:llama-server cannot launch method draft, num-steps 3, "
                                 "tree top-2/all: llama.cpp drafts chains only")),
    ],
)
def test_an_impossible_shape_fails_with_one_error_line_before_any_run(args, message, tiny_model_dir, tmp_path,
                                                                      monkeypatch, capsys):
    results = tmp_path / "results"
    base = ["sweep", "--target", str(tiny_model_dir), "--device", "cpu", "--data-dir", str(data_dir()),
            "--limit", "1", "--max-tokens", "2", "--results-dir", str(results), "--quiet"]
    code, _, err = main_exit(base + args, monkeypatch, capsys)
    assert code == 2 and message in err and err.strip().count("\n") == 0, err
    assert not results.exists()


BUDGET = 3


def _tree_counts(accepted_per_round: list[int], depth: int = 2) -> TreeAcceptanceCounts:
    """What a top-2 tree of BUDGET nodes and `depth` levels would report for these accepted lengths (tree_stats.py's
    rules): every node of the path below the last level offers both ranks; the path goes through the best child
    except at its last step, which took the runner-up."""
    counts = TreeAcceptanceCounts(offered_per_depth=[0] * depth, accepted_per_depth=[0] * depth,
                                  offered_per_rank=[0, 0], accepted_per_rank=[0, 0])
    for accepted in accepted_per_round:
        counts.num_rounds += 1
        counts.num_accepted += accepted
        counts.num_nodes += BUDGET
        counts.acceptance_lengths.append(accepted)
        counts.tree_sizes.append(BUDGET)
        for level in range(min(accepted + 1, depth)):
            counts.offered_per_depth[level] += 1
            counts.offered_per_rank[0] += 1
            counts.offered_per_rank[1] += 1
            if level < accepted:
                counts.accepted_per_depth[level] += 1
                counts.accepted_per_rank[1 if level == accepted - 1 else 0] += 1
    return counts


def _sweep_with_stand_in(args: list[str]) -> tuple[str, list[DraftShape]]:
    """Run `specbench sweep ARGS` where the engine takes each shape (its refusal of trees is the tree-engine
    branch's to lift) and every finished request of a tree cell carries tree counts; returns the output and the
    shapes the engine was given."""
    from specbench.backends.embedded import EmbeddedBackend
    from specbench.cli.app import app
    from specbench.engine.llm_engine import LLMEngine

    shapes: list[DraftShape] = []

    def set_draft_shape(engine, shape):
        shapes.append(shape)
        engine.scheduler.draft_shape = shape

    real_run_turns = EmbeddedBackend.run_turns

    def run_turns(backend, turns, concurrency, **kwargs):
        finished = real_run_turns(backend, turns, concurrency, **kwargs)
        if backend.engine.draft_shape.is_tree:
            for item in finished:
                item.output.stats.tree_counts = _tree_counts(item.output.stats.accepted_per_round)
        return finished

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LLMEngine, "set_draft_shape", set_draft_shape)
        patch.setattr(EmbeddedBackend, "run_turns", run_turns)
        result = CliRunner().invoke(app, ["sweep", *args], env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output, shapes


@pytest.fixture(scope="module")
def tree_run(tiny_model_dir, tiny_draft_dir, tmp_path_factory):
    """A sweep over k 0,2 x topk 1,2 with budget BUDGET."""
    results = tmp_path_factory.mktemp("results")
    output, shapes = _sweep_with_stand_in([
        "--target", str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir), "--num-steps", "0,2",
        "--eagle-topk", "1,2", "--num-draft-tokens", str(BUDGET), "--concurrency", "2", "--data-dir", str(data_dir()),
        "--limit", "3", "--shots", "1", "--max-tokens", "8", "--warmup", "0", "--device", "cpu", "--kv-cache-gb",
        "0.02", "--results-dir", str(results), "--run-id", "trees"])
    return results / "trees", output, shapes


def test_the_engine_gets_each_cells_shape(tree_run):
    _, _, shapes = tree_run
    assert shapes.count(DraftShape(2, BUDGET)) == 1  # its one cell (no warmup, no probe runs a tree)
    assert set(shapes) == {DraftShape(), DraftShape(2, BUDGET)}  # k = 0, the k = 2 chain and the probes: chains


def test_tree_cells_carry_their_shape_and_tree_metrics_chains_none(tree_run):
    run_dir, _, _ = tree_run
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("cell_id")
    assert list(cells.index) == ["r0-t0-c2-k0", "r0-t0-c2-k2", f"r0-t0-c2-k2-top2-n{BUDGET}"]
    tree, chain = cells.loc[f"r0-t0-c2-k2-top2-n{BUDGET}"], cells.loc["r0-t0-c2-k2"]
    assert (tree["eagle_topk"], tree["draft_token_budget"]) == (2, BUDGET)
    assert chain["eagle_topk"] == 1 and pd.isna(chain["draft_token_budget"])
    assert tree["tree_size"] == BUDGET and math.isnan(chain["tree_size"]) and chain["tree_accept_rate_per_rank"] is None
    requests = pd.read_parquet(run_dir / "requests.parquet")
    tree_rows = requests[requests["cell_id"] == f"r0-t0-c2-k2-top2-n{BUDGET}"]
    accepted = tree_rows["tree_accepted_per_depth"].apply(lambda v: int(v[0]) if len(v) else 0).sum()
    offered = tree_rows["tree_offered_per_depth"].apply(lambda v: int(v[0])).sum()
    assert tree["tree_accept_rate_per_depth"][0] == accepted / offered
    assert tree["is_metrics_consistent"], tree["metrics_mismatch"]
    assert tree["baseline_cell_id"] == "r0-t0-c2-k0" and not math.isnan(tree["speedup"])


def test_summary_shows_the_tree_rows_with_na_for_chains(tree_run):
    run_dir, output, _ = tree_run
    assert f"c=2 k=2 top-2/{BUDGET}" in output and "Mean tree size" in output
    assert f"x k 0,2 x shape chain,tree top-2/{BUDGET} x concurrency 2" in output  # the plan
    cells = pd.read_parquet(run_dir / "cells.parquet").to_dict("records")
    table = format_summary(cells, width=500)
    size_line = next(line for line in table.splitlines() if line.startswith("Mean tree size"))
    assert size_line.split()[-3:] == ["-", "-", f"{BUDGET:.1f}"]
    rank_line = next(line for line in table.splitlines() if line.startswith("Tree acceptance per rank"))
    assert rank_line.split()[-4:-2] == ["-", "-"]


def test_recommendations_range_over_k_and_shape(tree_run):
    run_dir, output, _ = tree_run
    rec = pd.read_parquet(run_dir / "recommendations.parquet").iloc[0]
    assert rec["num_candidates"] == 3
    assert {"best_eagle_topk", "best_draft_token_budget", "runner_up_eagle_topk"} <= set(rec.index)
    assert "best num-steps per grid point" in output and f"k=2 top-2/{BUDGET}" in output


def test_compare_matches_tree_cells_on_their_shape_and_shows_tree_rows(tree_run, tmp_path):
    from specbench.compare.comparison import CompareOptions, compare_runs
    from specbench.compare.loading import load_run
    from specbench.compare.table import render_markdown

    run_dir, _, _ = tree_run
    run = load_run(run_dir)
    comparison = compare_runs(run, run, CompareOptions(num_resamples=100))
    shapes = {(k.num_steps, k.eagle_topk, k.draft_token_budget) for k in comparison.matching.matched}
    assert shapes == {(0, 1, 0), (2, 1, 0), (2, 2, BUDGET)}
    tree_rows = {r.metric.name for r in comparison.rows if r.key.eagle_topk == 2 and r.metric.group == "tree"}
    assert {"tree_size", "tree_accept_depth_1", "tree_accept_rank_0"} <= tree_rows
    assert not any(r.metric.group == "tree" for r in comparison.rows if r.key.eagle_topk == 1)  # N/A: no row
    assert f"k=2 top-2/{BUDGET}" in render_markdown(comparison)


def test_crossovers_and_figures_keep_tree_cells_apart_from_the_chain_of_their_k():
    from specbench.compare.crossover import crossovers
    from specbench.compare.plot_data import chain_cells

    base = {"workload": "gsm8k", "method": "eagle3", "temperature": 0.0, "num_steps": 3}
    rows = [{**base, "concurrency": c, "speedup": s, "eagle_topk": topk, "draft_token_budget": budget}
            for c, s, topk, budget in ((1, 2.0, 1, None), (8, 0.9, 1, None), (1, 2.5, 4, 16), (8, 1.2, 4, 16))]
    found = {c.shape: c for c in crossovers(rows)}
    assert set(found) == {"", " top-4/16"}
    assert found[""].concurrency is not None and found[" top-4/16"].pays_everywhere
    assert list(chain_cells(pd.DataFrame(rows))["speedup"]) == [2.0, 0.9]


def test_resume_runs_only_the_missing_tree_cell(tree_run, tmp_path):
    run_dir, _, _ = tree_run
    copy = tmp_path / "trees"
    shutil.copytree(run_dir, copy)
    (copy / "parts" / "cells" / f"r0-t0-c2-k2-top2-n{BUDGET}.parquet").unlink()
    output, shapes = _sweep_with_stand_in(["--resume", str(copy), "--quiet"])
    assert set(shapes) == {DraftShape(2, BUDGET)} and "1 cells run, 2 already complete" in output, output
    cells = pd.read_parquet(copy / "cells.parquet")
    assert len(cells) == 3 and cells.set_index("cell_id").loc[f"r0-t0-c2-k2-top2-n{BUDGET}", "tree_size"] == BUDGET
