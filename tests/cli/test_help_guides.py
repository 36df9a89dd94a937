"""Help that guides a newcomer: --version, a first line pointing at `specbench demo`, every fault with what it breaks
and which check catches it, only the options that apply (gsm8k lists no random or speed_bench options, and no
default in its help text that contradicts its own), help text that Rich markup leaves whole, and gate's --model
named as sweep's (--server-model still accepted)."""

from __future__ import annotations

import re

from tests.support.cli_run import assert_one_clean_error, run_main


def test_version_and_the_first_line_of_help():
    from specbench import __version__

    result = run_main("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"specbench {__version__}"
    top = run_main("--help").stdout
    first = next(line.strip() for line in top.splitlines() if line.strip() and not line.strip().startswith("Usage"))
    assert "specbench demo" in first, first


def test_every_fault_says_what_it_breaks_and_which_check_catches_it():
    from specbench.faults import FAULTS

    listed = run_main("selftest", "--list-faults")
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == list(FAULTS)
    assert all("; caught by " in line for line in lines), lines
    assert any(line.startswith("verify-kv-off-by-one: ") and line.endswith("(corrupts the output; caught by greedy)")
               for line in lines), lines
    help_text = " ".join(run_main("selftest", "--help").stdout.split())
    assert "verify-kv-off-by-one: verify writes each token's KV" in help_text
    assert help_text.count("caught by") == len(FAULTS)


def test_preset_help_lists_only_what_applies_and_markup_keeps_brackets():
    gsm8k = run_main("gsm8k", "--help").stdout
    for absent in ("--speed-bench", "--input-len", "--output-len", "default: 50"):
        assert absent not in gsm8k, absent
    assert re.search(r"0 = all\s+\[default: 0\]", gsm8k), gsm8k
    assert "specbench-cli[flashinfer]" in gsm8k  # Rich markup would eat an unescaped [flashinfer]
    mtbench = run_main("mtbench", "--help").stdout
    assert "--shots" not in mtbench and "--speed-bench" not in mtbench
    assert "--speed-bench-data" in run_main("sweep", "--help").stdout  # the sweep keeps every option


def test_gate_names_the_server_model_as_sweep_does():
    help_text = run_main("gate", "--help").stdout
    assert "--model " in help_text and "--server-model" not in help_text
    for flag in ("--model", "--server-model"):  # the old name still parses (hidden)
        result = run_main("gate", flag, "m", "--base-url", "http://127.0.0.1:9", "--server-cmd", "x {port}")
        assert_one_clean_error(result, "pass one of them")
