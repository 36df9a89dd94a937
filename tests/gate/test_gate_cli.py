"""`specbench gate` end to end: on a clean embedded engine every stage passes against a clean reference; an injected
fault fails the stage that should catch it (exit 1, the stage named); a server launched with --server-cmd passes,
and one that dies mid-run fails the outputs stage; user errors exit 2 before anything runs."""

from __future__ import annotations

import json
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.gate.conftest import engine_args, run_gate_cli
from tests.support.tiny_models import data_dir

STAND_IN = Path(__file__).resolve().parents[1] / "backends" / "stand_in_server.py"


def _row(out: str, stage: str) -> list[str]:
    """The markdown row of a stage: [stage, status, metric, tolerance, power, reason]."""
    line = next(line for line in out.splitlines() if line.startswith(f"| {stage} |"))
    return [cell.strip() for cell in line.split(" | ")]


# --- user errors: exit 2, one line, nothing run -------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--skip", "latency"], "--skip latency: unknown stage; stages: lossless, logprobs, accuracy, acceptance, speed, "
                            "outputs"),
    (["--stages", "latency"], "--stages latency: unknown stage"),
    (["--logprobs-atol", "0"], "--logprobs-atol 0.0: out of range"),
    (["--base-url", "http://127.0.0.1:9", "--server-cmd", "x {port}"], "pass one of them"),
    (["--reference", "/nonexistent/ref.json", "--target", "x"], "cannot read gate reference /nonexistent/ref.json"),
    (["-k", "0"], "the gate needs k >= 1"),
    # output paths are checked before anything runs (`--target x` would fail later, loading no model)
    (["--junit", "/nonexistent/dir/gate.xml", "--target", "x"], "--junit /nonexistent/dir/gate.xml: no directory "
                                                                "/nonexistent/dir"),
    (["--report-md", "/nonexistent/r.md", "--target", "x"], "--report-md /nonexistent/r.md: no directory"),
    (["--write-reference", "/nonexistent/ref.json", "--target", "x"], "--write-reference /nonexistent/ref.json: "
                                                                      "no directory /nonexistent"),
])
def test_user_errors_exit_2_with_one_line(args, message, monkeypatch, capsys, tmp_path):
    code, _out, err = run_gate_cli([*args, "--results-dir", str(tmp_path)], monkeypatch, capsys)
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_an_output_path_that_is_a_directory_is_refused_before_the_gate_runs(monkeypatch, capsys, tmp_path):
    from specbench.gate.report import write_text

    results = tmp_path / "results"
    code, _out, err = run_gate_cli(["--junit", str(tmp_path), "--target", "x", "--results-dir", str(results)],
                                   monkeypatch, capsys)
    assert code == 2 and err == f"error: --junit {tmp_path}: is a directory\n" and not results.exists()
    write_text(tmp_path / "r.md", "whole\n", "markdown report")
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"] and (tmp_path / "r.md").read_text() == "whole\n"


# --- a server launched per k (the stdlib stand-in for llama-server) -------------------------------------------------

def _server_args(tmp_path: Path, *extra: str) -> list[str]:
    template = " ".join([shlex.quote(sys.executable), shlex.quote(str(STAND_IN)), "--port {port}",
                         "--num-steps {num_steps}", *extra])
    return ["--server-cmd", template, "-k", "2", "--data-dir", str(data_dir()), "--num-prompts", "3", "--shots",
            "0", "--max-tokens", "7", "--results-dir", str(tmp_path / "results")]


@pytest.mark.slow
def test_a_launched_server_passes_against_its_reference_and_a_dying_one_fails_outputs(tmp_path, monkeypatch,
                                                                                      capsys):
    ref = tmp_path / "ref.json"
    code, out, err = run_gate_cli([*_server_args(tmp_path), "--write-reference", str(ref)], monkeypatch, capsys)
    assert code == 0, out + err
    assert json.loads(ref.read_text())["acceptance"][0]["sample_id"] == "(server counters)"
    junit = tmp_path / "gate.xml"
    code, out, err = run_gate_cli([*_server_args(tmp_path), "--reference", str(ref), "--junit", str(junit),
                                   "--report-md", str(tmp_path / "gate.md")], monkeypatch, capsys)
    assert code == 0, out + err
    assert out.startswith("## specbench gate: PASS") and (tmp_path / "gate.md").read_text() == out
    assert [_row(out, s)[1] for s in ("lossless", "logprobs", "accuracy", "acceptance", "speed", "outputs")] == \
        ["PASS", "N/A", "PASS", "PASS", "N/A", "PASS"]  # speed: one repeat a side, no verdict on noise
    assert _row(out, "logprobs")[5].startswith("no logprobs: ")  # the stand-in streams only, and sends none
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "6" and suite.get("failures") == "0"

    code, out, err = run_gate_cli([*_server_args(tmp_path, "--die-at-num-steps", "2"), "--reference", str(ref),
                                   "--junit", str(junit)], monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (outputs)")
    row = _row(out, "outputs")
    assert row[1] == "FAIL" and "exited with status 3 during the cell" in row[5]
    failure = ET.parse(junit).getroot().find("testsuite/testcase[@name='outputs']/failure")
    assert "exited with status 3" in failure.get("message")


# --- the embedded engine: a clean reference, then a clean run and two injected faults -------------------------------

@pytest.fixture(scope="module")
def clean_reference(gate_pair, tmp_path_factory) -> Path:
    from specbench.cli.app import main

    ref = tmp_path_factory.mktemp("gate_ref") / "ref.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["specbench", "gate", *engine_args(gate_pair), "--write-reference", str(ref),
                                 "--results-dir", str(ref.parent / "results")])
        mp.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(SystemExit) as exc:
            main()
    assert exc.value.code == 0
    return ref


def test_a_clean_engine_passes_every_stage_against_a_clean_reference(gate_pair, clean_reference, tmp_path,
                                                                     monkeypatch, capsys):
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--reference", str(clean_reference),
                                   "--results-dir", str(tmp_path)], monkeypatch, capsys)
    assert code == 0, out + err
    statuses = {s: _row(out, s)[1] for s in ("lossless", "logprobs", "accuracy", "acceptance", "speed", "outputs")}
    assert statuses == {"lossless": "PASS", "logprobs": "PASS", "accuracy": "PASS", "acceptance": "PASS",
                        "speed": "N/A", "outputs": "PASS"}, out
    # the embedded engine's own k = 0 logprobs, fp32 on CPU: the tight tolerance
    assert "outputs vs k=0: 0/" in _row(out, "logprobs")[2] and "(fp32 engine)" in _row(out, "logprobs")[3]
    assert "AL " in _row(out, "acceptance")[2] and "(ref " in _row(out, "acceptance")[2]


@pytest.mark.slow
def test_a_target_side_fault_fails_lossless(gate_pair, clean_reference, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")  # as a production run: the engine would stop some mutants
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--reference", str(clean_reference), "--inject",
                                   "verify-kv-off-by-one", "--results-dir", str(tmp_path), "--skip", "speed"],
                                  monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (lossless")
    assert _row(out, "lossless")[1] == "FAIL" and "differ from the baseline" in _row(out, "lossless")[5]
    assert _row(out, "speed")[1] == "SKIP" and _row(out, "outputs")[1] == "PASS"
    assert "MUTANT[verify-kv-off-by-one]" in out
    assert "[divergent, margin " in out  # the clean target classified the mismatches (gate/engine_probe.py)


def test_a_draft_side_fault_keeps_lossless_and_fails_acceptance(gate_pair, clean_reference, tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--reference", str(clean_reference), "--inject",
                                   "draft-positions-off-by-one", "--results-dir", str(tmp_path), "--skip", "speed"],
                                  monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (acceptance)")
    assert _row(out, "lossless")[1] == "PASS" and _row(out, "acceptance")[1] == "FAIL"
    assert "dropped" in _row(out, "acceptance")[5]


def test_an_output_breaking_fault_withholds_acceptance_and_speed(gate_pair, clean_reference, tmp_path, monkeypatch,
                                                                capsys):
    """Issue 40: a bonus token from the wrong logits row read as acceptance +21% "improved"; once the outputs differ
    from k = 0, acceptance and speed measure a broken engine and say so instead of passing."""
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--reference", str(clean_reference), "--inject",
                                   "bonus-from-wrong-row", "--results-dir", str(tmp_path), "--skip", "logprobs"],
                                  monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (lossless)") and _row(out, "lossless")[1] == "FAIL"
    for stage in ("acceptance", "speed"):
        assert _row(out, stage)[1] == "N/A" and "not comparable: outputs differ" in _row(out, stage)[5], out
        assert "improved" not in _row(out, stage)[2]


def test_an_accuracy_drop_against_the_reference_fails_accuracy(gate_pair, clean_reference, tmp_path, monkeypatch,
                                                             capsys):
    """Tiny random models score 0 on GSM8K, so the drop is made on the reference side: a reference that scored
    60% (as the model before a regression did) against this run's 0%."""
    doc = json.loads(clean_reference.read_text())
    doc["accuracy"].update(strict=0.6, strict_stderr=0.2, flexible=0.6, flexible_stderr=0.2)
    better = tmp_path / "better.json"
    better.write_text(json.dumps(doc))
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--reference", str(better), "--results-dir",
                                   str(tmp_path / "results"), "--skip", "speed,acceptance,lossless"],
                                  monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (accuracy)") and "strict dropped 0.600" in _row(out, "accuracy")[5]


@pytest.mark.slow
def test_the_near_tie_margin_is_what_classifies_an_embedded_mismatch(gate_pair, clean_reference, tmp_path,
                                                                     monkeypatch, capsys):
    """With a margin wider than any top-2 gap, every mismatch of the faulty engine is a near-tie: lossless passes on
    the probe's verdict alone (the default margin failed it above), and --strict fails it again."""
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    args = [*engine_args(gate_pair), "--inject", "verify-kv-off-by-one", "--results-dir", str(tmp_path),
            "--stages", "lossless", "--near-tie-margin", "1000"]
    code, out, err = run_gate_cli(args, monkeypatch, capsys)
    assert code == 0, out + err
    row = _row(out, "lossless")
    assert row[1] == "PASS" and "0 divergent" in row[2] and "near-tie mismatch(es) only" in row[5]
    assert _row(out, "accuracy")[1] == "SKIP"
    code, out, err = run_gate_cli([*args, "--strict", "--results-dir", str(tmp_path / "strict")], monkeypatch,
                                  capsys)
    assert code == 1 and _row(out, "lossless")[1] == "FAIL", out + err


def test_an_engine_that_raises_fails_outputs_with_the_crash(gate_pair, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECBENCH_DEBUG_INVARIANTS", "0")
    junit = tmp_path / "gate.xml"
    code, out, err = run_gate_cli([*engine_args(gate_pair), "--inject", "bonus-row-past-end", "--results-dir",
                                   str(tmp_path / "results"), "--junit", str(junit)], monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (outputs)") and "Traceback" not in out + err
    row = _row(out, "outputs")
    assert row[1] == "FAIL" and row[5].startswith("crashed: IndexError: verify row")
    assert {_row(out, s)[1] for s in ("lossless", "logprobs", "accuracy", "acceptance", "speed")} == {"N/A"}
    assert "crashed: IndexError" in ET.parse(junit).getroot().find("testsuite/testcase[@name='outputs']/failure"
                                                                     ).get("message")


@pytest.mark.slow  # ~10 s: the not-slow loop stays under 5 min
def test_a_speed_only_fault_fails_speed_alone_against_a_reference_with_repeats(gate_pair, tmp_path, monkeypatch,
                                                                              capsys):
    """verify-stall leaves every token exact and makes each round wait 20 ms (several times a tiny round on CPU):
    with two repeats a side the run-to-run interval calls the slowdown, and only the speed stage fails."""
    args = [*engine_args(gate_pair), "--repeats", "2", "--skip", "logprobs,accuracy"]
    ref = tmp_path / "ref.json"
    code, out, err = run_gate_cli([*args, "--write-reference", str(ref), "--results-dir", str(tmp_path / "a")],
                                  monkeypatch, capsys)
    assert code == 0, out + err
    code, out, err = run_gate_cli([*args, "--reference", str(ref), "--inject", "verify-stall", "--results-dir",
                                   str(tmp_path / "b")], monkeypatch, capsys)
    assert code == 1, out + err
    assert out.startswith("## specbench gate: FAIL (speed)"), out
    assert _row(out, "speed")[1] == "FAIL" and "regressed" in _row(out, "speed")[5], _row(out, "speed")
    assert [_row(out, s)[1] for s in ("lossless", "acceptance", "outputs")] == ["PASS", "PASS", "PASS"]
