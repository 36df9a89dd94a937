"""`specbench generate` runs EAGLE heads and passes the aux-layer flags through to the engine."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from specbench.cli.app import app
from specbench.errors import SpecbenchError

PROMPT = "Natalia sold clips to 48 of her friends in April"


def _generate(target, head, *extra):
    args = ["generate", "--target", str(target), "--method", "eagle3", "--draft", str(head), "-k", "3",
            "--max-tokens", "8", "--ignore-eos", "--dtype", "fp32", "--device", "cpu", "--prompt", PROMPT, *extra]
    return CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)


@pytest.mark.slow  # a CLI `generate` run on fitted heads: ~12 s
def test_generate_with_eagle3_and_aux_flags(target_dir, head_dir):
    result = _generate(target_dir("t4"), head_dir("eagle3-speculators"), "--eagle-aux-layer-ids", "1,2,4",
                       "--eagle-aux-convention", "hidden-states-index")
    assert result.exit_code == 0, result.output
    assert "method=eagle3 num_steps=3" in result.output
    assert "per-position acceptance" in result.output


def test_generate_refuses_out_of_range_aux_ids(target_dir, head_dir):
    with pytest.raises(SpecbenchError, match="outside"):
        _generate(target_dir("t4"), head_dir("eagle3-speculators"), "--eagle-aux-convention", "layer-output")
