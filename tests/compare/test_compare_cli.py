"""`specbench compare` through the CLI: --fail-on exit codes, output formats, unmatched cells, manifest
differences, labels, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
import sys

import pandas as pd
import pytest

from specbench.runs.schema import SCHEMA_VERSION
from tests.support.compare_fixtures import RunSpec, write_run

RESAMPLES = ["--resamples", "300"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_run(root, "base", RunSpec("before"))
    write_run(root, "faster", RunSpec("faster", speed=1.2, timing_seed=1))
    write_run(root, "slower", RunSpec("slower", speed=1 / 1.2, timing_seed=1))
    repeated = dict(repeats=3, repeat_noise=0.01, num_requests=20)  # speed verdicts need repeats on both sides
    write_run(root, "base3", RunSpec("before3", **repeated))
    write_run(root, "slower3", RunSpec("slower3", speed=1 / 1.2, baseline_speed=1.0, timing_seed=1, **repeated))
    write_run(root, "uniform3", RunSpec("uniform3", speed=1 / 1.2, timing_seed=1, **repeated))
    write_run(root, "wrong", RunSpec("wrong", is_correct=lambda i: i % 10 < 5, answer_seed=1, is_lossless=False))
    write_run(root, "other_c", RunSpec("other_c", concurrencies=(1, 8)))
    write_run(root, "other_device", RunSpec("other_device", manifest={"device": {"name": "other-cpu"}}))
    write_run(root, "other_workload", RunSpec("other_workload", workload="random"))
    write_run(root, "other_shots", RunSpec("other_shots", manifest={"config": {"shots": 1},
                                                                     "sampling": {"max_tokens": 64}}))
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


def _compare(results, before, after, *extra, monkeypatch, capsys):
    args = ["compare", str(results / before), str(results / after), *RESAMPLES, *extra]
    return _main(args, monkeypatch, capsys)


@pytest.mark.parametrize(
    "before, after, fail_on, code, offending, unjudged",
    [
        ("base", "wrong", "regressed", 1, ("GSM8K Accuracy", "Same Answer as k=0", "Same Text as k=0"), True),
        ("base", "wrong", "regressed:accuracy_flexible", 1, ("GSM8K Accuracy flexible-extract",), False),
        ("base", "faster", "regressed:accuracy,agreement", 0, None, False),
        ("base", "faster", "regressed", 1, None, True),  # one run a side: speed not judged is a failure
        ("base", "slower", "regressed:output_throughput", 1, None, True),
        ("base3", "slower3", "regressed:output_throughput", 1, ("Output Throughput",), False),
        ("base3", "uniform3", "regressed:output_throughput", 0, None, False),  # the control moved alike: drift
        ("base", "slower", "regressed:accuracy", 0, None, False),
    ],
)
def test_fail_on_exits_non_zero_exactly_when_a_named_metric_regressed_or_was_not_judged(
        results, before, after, fail_on, code, offending, unjudged, monkeypatch, capsys):
    got, out, err = _compare(results, before, after, "--fail-on", fail_on, monkeypatch=monkeypatch, capsys=capsys)
    assert got == code, err
    assert "Output Throughput (tok/s)" in out  # the table is printed either way
    lines = err.splitlines()
    not_judged = [line for line in lines if "not judged" in line]
    assert bool(not_judged) == unjudged
    if unjudged:
        why = "outputs differ from k=0" if after == "wrong" else "no run-to-run estimate (1 run per side)"
        assert any(line.startswith(f"--fail-on: output_throughput: not judged in 4 cell(s): {why}")
                   for line in not_judged)
    correctness = [line for line in lines if line.startswith("--fail-on: CORRECTNESS: ")]
    assert bool(correctness) == (after == "wrong")  # its greedy outputs differ from k=0: fails any gate
    drift = [line for line in lines if line.startswith("note: --fail-on: ")]
    assert bool(drift) == (after == "uniform3")
    if drift:
        assert all("is within drift (k=0 " in line and "not failed" in line and "specbench ab" in line
                   for line in drift)
    report = [line for line in lines if line not in not_judged + correctness + drift]
    if offending:
        header, *rows = report
        assert f"--fail-on {fail_on}:" in header and f"(exit {code})" in header
        assert rows and all(any(name in row for name in offending) for row in rows)
        if fail_on == "regressed":
            assert len(rows) == out.count("REGRESSED")
        elif before == "base3":
            assert len(rows) == 2  # the k = 2 cells: the k = 0 control did not move
            assert all("3+3 runs sd" in row and "k=0 " in row for row in rows)  # the load beside the verdict
        else:
            assert len(rows) == 4  # one per cell (2 concurrencies x 2 num-steps)
    else:
        assert not report


def test_formats_and_output_file(results, tmp_path, monkeypatch, capsys):
    code, out, _ = _compare(results, "base", "faster", "--output", str(tmp_path / "t.md"),
                            monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and f"wrote {tmp_path / 't.md'}" in out
    markdown = (tmp_path / "t.md").read_text()
    assert ("| Metric | Before (c=1) | After (c=1) | Delta | 95% CI | Verdict | MDE | Noise | Before (c=4) |"
            in markdown)
    assert "| n/a (1 run) | - | 1+1 runs |" in markdown  # one run a side: no speed verdict
    assert "### gsm8k · draft · k=2 · temperature 0" in markdown and "| Acceptance Length |" in markdown

    _compare(results, "base", "faster", "--output", str(tmp_path / "t.csv"), monkeypatch=monkeypatch, capsys=capsys)
    table = pd.read_csv(tmp_path / "t.csv")
    throughput = table[table["metric"] == "output_throughput"]
    assert len(throughput) == 4 and set(throughput["verdict"]) == {"no run-to-run estimate"}  # one run a side
    assert set(throughput["noise_basis"]) == {"runs"} and set(throughput["num_runs_before"]) == {1}
    assert throughput["ci_low"].isna().all() and throughput["mde"].isna().all()
    within = throughput["ci_bootstrap_low"] <= throughput["delta"]
    assert within.all() and (throughput["delta"] <= throughput["ci_bootstrap_high"]).all()
    accuracy = table[table["metric"] == "accuracy_flexible"]
    assert set(accuracy["noise_basis"]) == {"questions"} and (accuracy["mde"] > 0).all()

    code, out, _ = _compare(results, "base", "faster", "--format", "json", "--metrics", "acceptance_length",
                            monkeypatch=monkeypatch, capsys=capsys)
    doc = json.loads(out)
    assert {r["metric"] for r in doc["rows"]} == {"acceptance_length"} and len(doc["rows"]) == 2
    assert doc["before"]["label"] == "before" and doc["options"]["num_resamples"] == 300


def test_unmatched_cells_are_listed_not_dropped(results, monkeypatch, capsys):
    code, out, _ = _compare(results, "base", "other_c", "--format", "json", monkeypatch=monkeypatch, capsys=capsys)
    doc = json.loads(out)
    assert doc["unmatched"]["only_before"] == ["gsm8k draft k=0 temperature=0 c=4", "gsm8k draft k=2 temperature=0 c=4"]
    assert len(doc["unmatched"]["only_after"]) == 2
    one_sided = [r for r in doc["rows"] if r["concurrency"] == 8 and r["metric"] == "output_throughput"]
    assert one_sided and all(r["before"] is None and r["verdict"] == "n/a" for r in one_sided)
    code, out, _ = _compare(results, "base", "other_c", monkeypatch=monkeypatch, capsys=capsys)
    assert "only in before: gsm8k draft k=2 temperature=0 c=4" in out and "After (c=8)" in out
    assert " N/A " in out


def test_manifest_differences_warn_loudly_or_fail_with_strict(results, monkeypatch, capsys):
    code, out, err = _compare(results, "base", "other_device", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and "WARNING: the runs differ in device (cpu test-cpu vs cpu other-cpu)" in err
    assert "WARNING: not comparable: device" in out
    code, out, err = _compare(results, "base", "other_device", "--strict", monkeypatch=monkeypatch, capsys=capsys)
    expected = "error: --strict: the runs are not comparable (device: cpu test-cpu vs cpu other-cpu)"
    assert code == 2 and err.strip() == expected


def test_measurement_settings_make_runs_incomparable(results, monkeypatch, capsys):
    """Shots and max tokens change the prompts and output lengths: not a change of the engine."""
    code, out, err = _compare(results, "base", "other_shots", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0
    assert "WARNING: the runs differ in shots (default vs 1)" in err
    assert "WARNING: the runs differ in max_tokens (256 vs 64)" in err
    # Only what differs from the defaults or between the runs (workload=gsm8k, top_p=1.0, ... are defaults).
    (settings,) = [line for line in out.splitlines() if line.startswith("settings: ")]
    assert settings.startswith("settings: limit=40, shots=default, chat_template=False, max_tokens=256")
    assert "workload=" not in settings and "top_p" not in settings and "request_rate" not in settings
    assert "WARNING: not comparable: shots: default -> 1" in out
    code, out, err = _compare(results, "base", "other_shots", "--strict", "--fail-on", "regressed",
                              monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and err.strip().count("\n") == 0
    assert "error: --strict: the runs are not comparable (" in err and "shots: default vs 1" in err
    assert "max_tokens: 256 vs 64" in err


def test_compared_things_are_not_incomparable(results, monkeypatch, capsys):
    """The method, num_steps, engine options and label are what a comparison is for."""
    from specbench.runs.sweep_config import MEASUREMENT_SETTINGS

    assert not {"method", "num_steps", "label", "attention_backend", "kv_cache_gb"} & set(MEASUREMENT_SETTINGS)
    code, _, err = _compare(results, "base", "faster", "--strict", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and "WARNING" not in err


def test_labels_resolve_inside_a_results_dir(results, monkeypatch, capsys):
    code, out, _ = _main(["compare", "before", "faster", "--results-dir", str(results), *RESAMPLES,
                          "--metrics", "output_throughput"], monkeypatch, capsys)
    assert code == 0 and out.startswith("Before: before (base)  After: faster")


def test_show_changed_lists_the_requests_whose_answer_changed(results, monkeypatch, capsys):
    code, out, _ = _compare(results, "base", "wrong", "--metrics", "accuracy", "--show-changed", "3",
                            monkeypatch=monkeypatch, capsys=capsys)
    # Questions i % 10 in {5, 6, 7} turned wrong; those wrong in both (8, 9) got other wrong answers.
    head, *listed = out[out.index("request(s) changed"):].strip().splitlines()
    assert head.endswith("first 3:") and len(listed) == 3
    for line in listed:
        sample = int(line.split(" sample ")[1].split()[0])
        assert sample % 10 >= 5
        assert ("'42' -> " in line) == (sample % 10 < 8) and "(gold '42')" in line


def _corrupt(run, name):
    (run / name).write_bytes(b"PAR1 this is not parquet")


def _drop(run, name):
    (run / name).unlink()


@pytest.mark.parametrize(
    "setup, message",
    [
        (None, "nonexistent: no such run directory, and no run with that id or label in"),
        ("empty_dir", "is not a specbench run directory (no manifest.json)"),
        ("results_dir", "is a results directory (runs: base, base3, faster"),
        ("corrupt_cells", "cells.parquet: not a readable parquet file"),
        ("missing_requests", "requests.parquet is missing"),
        ("bad_manifest", "manifest.json: not readable JSON"),
        ("foreign_manifest", "not a specbench manifest (no schema_version)"),
        ("old_schema", "results schema version 0 differs"),
        # a run written before the columns of the current version existed (their tables lack them)
        ("previous_schema", (f"results schema version {SCHEMA_VERSION - 1} differs from this specbench's "
                             f"{SCHEMA_VERSION} (docs/RESULTS_SCHEMA.md); open it with the specbench that wrote it")),
        ("foreign_parquet", "not a specbench cells table (missing columns: run_id, cell_id"),
        ("no_overlap", "the runs share no cell (matched on workload, method, num-steps, temperature, concurrency, "
                       "tree shape)"),
    ],
)
def test_bad_input_is_one_clear_error(setup, message, results, tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    shutil.copytree(results / "base", run)
    target = str(tmp_path / "nonexistent")
    if setup == "empty_dir":
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "notes.txt").write_text("hello")
        target = str(tmp_path / "empty")
    elif setup == "results_dir":
        target = str(results)
    elif setup == "no_overlap":
        target = str(results / "other_workload")
    elif setup is not None:
        target = str(run)
        if setup == "corrupt_cells":
            _corrupt(run, "cells.parquet")
        elif setup == "missing_requests":
            _drop(run, "requests.parquet")
        elif setup == "bad_manifest":
            (run / "manifest.json").write_text("{not json")
        elif setup == "foreign_manifest":
            (run / "manifest.json").write_text('{"name": "something else"}')
        elif setup == "old_schema":
            manifest = json.loads((run / "manifest.json").read_text())
            (run / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 0}))
        elif setup == "previous_schema":
            manifest = json.loads((run / "manifest.json").read_text())
            (run / "manifest.json").write_text(json.dumps({**manifest, "schema_version": SCHEMA_VERSION - 1}))
            cells = pd.read_parquet(run / "cells.parquet")
            cells.drop(columns=["is_metrics_consistent", "prefix_cache_hit_rate"]).to_parquet(run / "cells.parquet")
        elif setup == "foreign_parquet":
            pd.DataFrame({"x": [1, 2]}).to_parquet(run / "cells.parquet")
    code, out, err = _main(["compare", str(results / "base"), target, "--results-dir", str(tmp_path)], monkeypatch,
                           capsys)
    assert code == 2, (out, err)
    assert message in err and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith("error: ")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--metrics", "throughput,bogus"], "unknown metric 'bogus'; supported: throughput, latency"),
        (["--fail-on", "improved"], "--fail-on 'improved': condition must be one of regressed"),
        (["--fail-on", "regressed:nope"], "unknown metric 'nope'"),
        (["--format", "xml"], "--format 'xml': choose one of console, md, csv, json"),
        (["--confidence", "95"], "--confidence must be between 0 and 1, got 95"),
    ],
)
def test_bad_options_are_one_clear_error(args, message, results, monkeypatch, capsys):
    code, _, err = _compare(results, "base", "faster", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and message in err and err.strip().count("\n") == 0


def test_ambiguous_label_is_refused(results, tmp_path, monkeypatch, capsys):
    root = tmp_path / "res"
    shutil.copytree(results / "base", root / "a")
    shutil.copytree(results / "base", root / "b")
    code, _, err = _main(["compare", "before", "before", "--results-dir", str(root)], monkeypatch, capsys)
    assert code == 2 and "label 'before' names 2 runs" in err


def test_compare_fits_120_columns_by_default_and_wide_shows_every_column(results, monkeypatch, capsys):
    """Piped (no terminal), the table used to run ~230 columns wide; the details are behind --wide."""
    code, out, _ = _compare(results, "base3", "slower3", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and max(map(len, out.splitlines())) <= 120
    assert "Verdict  MDE" not in out and "Noise" not in out
    code, wide, _ = _compare(results, "base3", "slower3", "--wide", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and max(map(len, wide.splitlines())) > 120 and "MDE" in wide and "Noise" in wide
    assert "3+3 runs sd" in wide and "k=0 " in wide  # the load evidence beside every speed verdict


def test_compare_leads_with_correctness_then_the_ratios_inside_each_run(results, monkeypatch, capsys):
    code, out, _ = _compare(results, "base", "wrong", monkeypatch=monkeypatch, capsys=capsys)
    lines = out.splitlines()
    head = " ".join(line.strip() for line in lines[1:3])
    assert head.startswith("CORRECTNESS REGRESSION: gsm8k draft k=2 temperature=0 c=1: greedy outputs differ from "
                           "k=0 after the change (same text 1.000 -> ")
    ratios = lines.index("ratios inside each run (robust to the runs' different loads):")
    assert ratios < min(i for i, line in enumerate(lines) if line.startswith("gsm8k · draft"))
    assert "Speedup vs k=0 (x)" in out and "not comparable" in out  # the broken cells' speed rows
    code, out, _ = _compare(results, "base3", "slower3", monkeypatch=monkeypatch, capsys=capsys)
    assert out.splitlines()[1] == "correctness: greedy outputs equal k=0 in all 2 greedy speculative cell(s)"


def test_console_table_wraps_to_the_terminal_width(results):
    from specbench.compare.comparison import CompareOptions, compare_runs
    from specbench.compare.loading import load_run
    from specbench.compare.table import render_console

    comparison = compare_runs(load_run(results / "base"), load_run(results / "faster"),
                              CompareOptions(metrics=("throughput",), num_resamples=200))
    text = render_console(comparison, width=120)
    assert max(len(line) for line in text.splitlines()) <= 120
    assert text.count("gsm8k · draft · k=0 · temperature 0") == 2  # c=4 continues in a second table


def test_workload_default_temperature_cells_match(tmp_path, monkeypatch, capsys):
    spec = dict(temperatures=(float("nan"),), num_steps=(0,), concurrencies=(2,), num_requests=8)
    write_run(tmp_path, "a", RunSpec("a", **spec))
    write_run(tmp_path, "b", RunSpec("b", timing_seed=1, **spec))
    code, out, _ = _compare(tmp_path, "a", "b", "--format", "md", "--metrics", "output_throughput",
                            monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and "### gsm8k · draft · k=0 · temperature default" in out
    assert "| Output Throughput (tok/s) |" in out and "N/A" not in out
