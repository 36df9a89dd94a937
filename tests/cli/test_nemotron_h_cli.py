"""The CLI on a Nemotron-H target (tests/support/tiny_nemotron_h.py): generate with n-gram speculation and a sweep
with a draft LM run it end to end, as they run Bamba and Qwen3-Next (tests/cli/test_hybrid_cli.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli_run import run_main
from tests.support.tiny_models import build_tiny_model
from tests.support.tiny_nemotron_h import build_tiny_nemotron_h

CPU = ("--device", "cpu", "--dtype", "fp32")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("nemotron_h_cli")
    build_tiny_nemotron_h(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root


@pytest.mark.slow  # a tiny checkpoint built by transformers, the CLI end to end: ~7 s each on 2 busy cores
def test_generate_runs_a_nemotron_h_target_with_ngram(dirs):
    result = run_main("generate", "--target", str(dirs / "target"), "-p", "Natalia sold clips", "--max-tokens", "6",
                      "--ignore-eos", "--method", "ngram", *CPU)
    assert result.exit_code == 0, result.stderr
    assert "method=ngram" in result.stdout and "output_tokens=6" in result.stdout


@pytest.mark.slow
def test_sweep_runs_a_nemotron_h_target_with_a_draft_lm(dirs, tmp_path):
    result = run_main("sweep", "--target", str(dirs / "target"), "--method", "draft", "--draft", str(dirs / "draft"),
                      "-k", "3", "-w", "gsm8k", "-n", "2", "--max-tokens", "6", "-c", "2", "--results-dir",
                      str(tmp_path), "-q", *CPU)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(next(tmp_path.glob("*/manifest.json")).read_text())
    assert "nemotron_h" in json.dumps(manifest)
