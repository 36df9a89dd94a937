"""The CLI on a hybrid target (a tiny Qwen3-Next directory): generate and sweep run it with speculation (n-gram, a draft
LM, its own MTP module, EAGLE-3; chains and trees); what the engine does not support on hybrids (a hybrid draft LM) ends
in one clean error and a non-zero exit, never a traceback; prefix caching is off with the reason recorded."""

from __future__ import annotations

import json

import pytest

from tests.support.cli_run import assert_one_clean_error, run_main
from tests.support.tiny_hybrid import build_tiny_hybrid
from tests.support.tiny_models import build_tiny_model

from specbench.models.config import ModelConfig
from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

pytestmark = pytest.mark.slow  # whole CLI runs on a hybrid target (generate, sweep, check, stress)

CPU = ("--device", "cpu", "--dtype", "fp32")


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid_cli")
    build_tiny_hybrid(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    build_mtp_target(root / "target", root / "mtp", MTP_PREFIX)
    config = ModelConfig.from_hf(json.loads((root / "target" / "config.json").read_text()))
    write_dummy_eagle3_head(config, root / "eagle3", draft_vocab_size=config.vocab_size)
    return root


def test_generate_runs_a_hybrid_target_with_ngram(dirs):
    result = run_main("generate", "--target", str(dirs / "target"), "-p", "Natalia sold clips", "--max-tokens", "6",
                      "--method", "ngram", *CPU)
    assert result.exit_code == 0, result.stderr
    assert "method=ngram" in result.stdout


def test_sweep_runs_a_hybrid_target_and_records_its_engine_notes(dirs, tmp_path):
    result = run_main("sweep", "--target", str(dirs / "target"), "--method", "draft", "--draft", str(dirs / "draft"),
                      "-k", "3", "-w", "gsm8k", "-n", "2", "--max-tokens", "6", "-c", "2", "--enable-prefix-caching",
                      "--results-dir", str(tmp_path), "-q", *CPU)
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(next(tmp_path.glob("*/manifest.json")).read_text())
    # prefix hits resume the recurrent layers from state snapshots; graphs: CUDA only
    assert manifest["prefix_caching"] is True and manifest["prefix_caching_note"] == "on"
    assert manifest["recurrent_kernels"] == "torch" and manifest["cuda_graphs"] == "off: cpu"


def test_tree_drafts_on_a_hybrid_target_sweep(dirs, tmp_path):
    """Tree rounds on a hybrid (recurrent/tree_verify.py): the sweep's tree cells run beside its chain ones."""
    result = run_main("sweep", "--target", str(dirs / "target"), "--method", "draft", "--draft", str(dirs / "draft"),
                      "-k", "3", "--eagle-topk", "1,2", "-w", "gsm8k", "-n", "1", "--max-tokens", "4", "-c", "1",
                      "--no-speedup", "--results-dir", str(tmp_path), "-q", *CPU)
    assert result.exit_code == 0, result.stderr


def test_a_hybrid_draft_lm_is_one_clean_error(dirs):
    result = run_main("generate", "--target", str(dirs / "target"), "-p", "hi", "--max-tokens", "4",
                      "--method", "draft", "--draft", str(dirs / "target"), *CPU)
    assert result.exit_code != 0
    assert_one_clean_error(result, "cannot be a draft LM")


def test_generate_runs_a_hybrid_target_with_its_mtp_module_and_with_eagle3(dirs):
    mtp = run_main("generate", "--target", str(dirs / "mtp"), "-p", "Natalia sold clips", "--max-tokens", "6",
                   "--method", "mtp", "-k", "2", *CPU)
    assert mtp.exit_code == 0, mtp.stderr
    assert "method=mtp" in mtp.stdout
    eagle3 = run_main("generate", "--target", str(dirs / "target"), "-p", "Natalia sold clips", "--max-tokens", "6",
                      "--method", "eagle3", "--draft", str(dirs / "eagle3"), "-k", "3", *CPU)
    assert eagle3.exit_code == 0, eagle3.stderr
    assert "method=eagle3" in eagle3.stdout


def test_mtp_on_a_hybrid_target_without_mtp_weights_is_one_clean_error(dirs):
    result = run_main("generate", "--target", str(dirs / "target"), "-p", "hi", "--max-tokens", "4",
                      "--method", "mtp", *CPU)
    assert result.exit_code != 0
    assert_one_clean_error(result, "has no MTP weights")


def test_the_selftest_refuses_a_hybrid_fault_without_its_hybrid_target_naming_where_it_runs():
    result = run_main("selftest", "--no-hybrid", "--faults", "state-not-rolled-back", "--seeds", "0", "--device",
                      "cpu")
    assert result.exit_code != 0
    assert_one_clean_error(result, "runs on the selftest's hybrid target", "--hybrid")
