"""`gsm8k --inject` then `compare`: a target-corrupting mutant is flagged by answer/text agreement with k=0,
and every compare table names the mutant run."""

from __future__ import annotations

from typer.testing import CliRunner

from tiny_models import data_dir


def _run(app, args):
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result


def test_compare_flags_a_target_corrupting_mutant(tiny_model_dir, tiny_draft_dir, tmp_path):
    from specbench.cli.app import app

    common = ["--target", str(tiny_model_dir), "--method", "draft", "--draft", str(tiny_draft_dir), "-c", "2",
              "-k", "0,2", "--limit", "10", "--shots", "1", "--max-tokens", "16", "--device", "cpu",
              "--kv-cache-gb", "0.05", "--results-dir", str(tmp_path), "--quiet", "--data-dir", str(data_dir())]
    clean = _run(app, ["gsm8k", *common, "--run-id", "clean", "--label", "before"])
    mutant = _run(app, ["gsm8k", *common, "--run-id", "mut", "--label", "after", "--inject", "bonus-from-wrong-row"])
    assert clean.exit_code == 0 and mutant.exit_code == 0
    assert "MUTANT[bonus-from-wrong-row]" in mutant.output
    result = _run(app, ["compare", str(tmp_path / "clean"), str(tmp_path / "mut"), "--format", "md",
                        "--fail-on", "regressed:agreement_text"])
    assert "MUTANT[bonus-from-wrong-row]" in result.output
    text_row = next(line for line in result.output.splitlines() if line.startswith("| Same Text as k=0"))
    assert "REGRESSED" in text_row, text_row
    assert result.exit_code == 1
