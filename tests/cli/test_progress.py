"""Long commands say where they are on stderr in the sweep's style (runs/phase_progress.py), with or without a
terminal; --quiet silences them (`gate`'s own test: tests/gate/test_gate_progress.py)."""

from __future__ import annotations

import io
import re

import pytest

from specbench.runs.phase_progress import PhaseProgress
from tests.support.cli_run import run_main


def test_phase_lines_count_time_and_estimate_what_is_left():
    ticks = iter([0.0, 0.0, 10.0, 10.0, 75.0, 75.0])
    out = io.StringIO()
    progress = PhaseProgress("check", 3, quiet=False, file=out, clock=lambda: next(ticks))
    progress.start("greedy")
    progress.done("greedy", "PASS")
    progress.start("sampled")
    progress.done("sampled", "FAIL")
    assert out.getvalue().splitlines() == [
        "check 1/3 greedy ...", "check 1/3 greedy: PASS in 10s; elapsed 10s, about 20s left",
        "check 2/3 sampled ...", "check 2/3 sampled: FAIL in 1m05s; elapsed 1m15s, about 38s left"]
    quiet = io.StringIO()
    silent = PhaseProgress("check", 3, quiet=True, file=quiet)
    silent.start("greedy")
    silent.done("greedy")
    assert quiet.getvalue() == ""


@pytest.mark.slow
def test_selftest_prints_a_line_per_row_and_quiet_silences_them():
    args = ["selftest", "--jobs", "1", "--seeds", "0", "--methods", "ngram", "--faults", "none", "--checks",
            "greedy", "--no-window-moe", "--no-trees", "--no-hybrid"]
    result = run_main(*args)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert re.search(r"^selftest row 2 ngram seed 0 clean: ok in \d+s; elapsed \d+s$", result.stderr, re.M), \
        result.stderr
    quiet = run_main(*args, "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr
    assert "selftest passed" in quiet.stdout


def test_check_prints_a_line_per_check_and_quiet_silences_them(tmp_path):
    from specbench.selftest.tiny import build_tiny_pair
    from tests.support.tiny_models import VOCAB_SIZE, data_dir, load_tiny_tokenizer

    target, draft = build_tiny_pair(tmp_path, seed=0, vocab_size=VOCAB_SIZE)
    for path in (target, draft):
        load_tiny_tokenizer().save_pretrained(path)
    args = ["check", "--target", str(target), "--draft", str(draft), "--device", "cpu", "--kv-cache-gb", "0.05",
            "--data-dir", str(data_dir()), "--max-tokens", "4", "-k", "2", "--checks", "greedy,baseline",
            "--budget", "fast"]
    result = run_main(*args)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert re.search(r"^check 1/2 greedy: PASS in \d+s; elapsed \d+s, about \d+s left$", result.stderr, re.M), \
        result.stderr
    assert re.search(r"^check 2/2 baseline: SKIP in \d+s; elapsed \d+s$", result.stderr, re.M), result.stderr
    quiet = run_main(*args, "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr


def test_check_lossless_prints_a_line_per_server_and_quiet_silences_them(tmp_path):
    import shlex
    import sys
    from pathlib import Path

    from tests.support.tiny_models import data_dir

    stand_in = Path(__file__).resolve().parents[1] / "backends" / "stand_in_server.py"
    template = " ".join([shlex.quote(sys.executable), shlex.quote(str(stand_in)), "--port {port}",
                         "--num-steps {num_steps}"])
    args = ["check-lossless", "--server-cmd", template, "-k", "2", "--server-log-dir", str(tmp_path / "logs"),
            "--data-dir", str(data_dir()), "--shots", "0", "--num-prompts", "2", "--max-tokens", "4"]
    result = run_main(*args)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert re.search(r"^check-lossless 1/2 speculative server \(2 prompts\) in \d+s; elapsed \d+s, about \d+s left$",
                     result.stderr, re.M), result.stderr
    assert re.search(r"^check-lossless 2/2 reference server \(2 prompts\) in \d+s", result.stderr, re.M)
    quiet = run_main(*args, "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr
