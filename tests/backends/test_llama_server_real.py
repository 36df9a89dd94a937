"""A real speculating llama.cpp server (scripts/build_llama_server.sh) launched through --server-cmd on the real
SmolLM2 GGUF, the same file as target and draft: -k 0,1,3 gives acceptance from its llamacpp: counters in every
speculative cell, agreeing with its own per-response `timings`, and speedup / answer agreement against k = 0."""

from __future__ import annotations

import shlex

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.support.llama_server_binary import llama_server_binary, skip_reason
from tests.support.tiny_models import data_dir

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

# -t 1: llama.cpp's spinning threads crawl when the cores are shared (a busy 2-core machine)
COMMON = "--host {host} --port {port} --metrics -np 1 -c 2048 -t 1 --no-warmup"
SPEC = "-md {draft} --spec-type draft-simple --spec-draft-n-max {num_steps} --spec-draft-n-min 0"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from specbench.cli.app import app
    from specbench.models.default_model import packaged_gguf

    binary = shlex.quote(str(llama_server_binary()))
    results = tmp_path_factory.mktemp("results")
    gguf = packaged_gguf()
    args = ["sweep", "--backend", "openai", "--target", gguf, "--draft", gguf, "--method", "draft",
            "--server-cmd", f"{binary} -m {{model}} {SPEC} {COMMON}",
            "--server-baseline-cmd", f"{binary} -m {{model}} {COMMON}",
            "--workload", "gsm8k", "--shots", "0", "--data-dir", str(data_dir()), "--limit", "2",
            "--max-tokens", "32", "-k", "0,1,3", "-c", "1", "--warmup", "0", "--server-ready-timeout", "120",
            "--results-dir", str(results), "--run-id", "llama", "--quiet"]
    result = CliRunner().invoke(app, args, env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return results / "llama", result.output


def test_every_speculative_cell_has_acceptance_from_the_server(run):
    run_dir, output = run
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("num_steps")
    assert sorted(cells.index) == [0, 1, 3]
    for k in (1, 3):
        cell = cells.loc[k]
        assert cell["acceptance_source"] == "server:llamacpp", cell["acceptance_note"]
        assert cell["num_draft_rounds"] > 0 and cell["num_errors"] == 0
        assert len(cell["server_accepted_per_pos"]) == k  # llama.cpp sizes its per-position counters to n_max
        assert cell["is_acceptance_consistent"]
        assert 1.0 <= cell["acceptance_length"] <= k + 1
    assert (run_dir / "servers" / "k3.log").is_file() and "acceptance from: server:llamacpp" in output


def test_per_position_counts_agree_with_llamacpps_own_timings(run):
    run_dir, _ = run
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("num_steps")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    for k in (1, 3):
        mine = requests[requests["num_steps"] == k]
        assert (mine["draft_stats_source"] == "llamacpp:timings").all()
        cell = cells.loc[k]
        assert mine["num_draft_tokens"].sum() == cell["num_draft_tokens"]
        assert mine["num_accepted_tokens"].sum() == cell["num_accepted_tokens"]
        assert sum(cell["server_accepted_per_pos"]) == cell["num_accepted_tokens"]


def test_speedup_and_greedy_agreement_against_k0(run):
    run_dir, _ = run
    cells = pd.read_parquet(run_dir / "cells.parquet").set_index("num_steps")
    requests = pd.read_parquet(run_dir / "requests.parquet")
    for k in (1, 3):
        assert cells.loc[k]["speedup"] > 0 and not pd.isna(cells.loc[k]["agreement_text"])
    base = requests[requests["num_steps"] == 0].set_index("sample_id")["output_text"]
    spec = requests[requests["num_steps"] == 3].set_index("sample_id")["output_text"]
    identical = (base == spec.reindex(base.index)).mean()
    assert identical == cells.loc[3]["agreement_text"]  # greedy k = 0 vs k = 3 outputs compared text by text


def test_check_lossless_on_a_real_server_pair(tmp_path):
    """Greedy k = 3 vs k = 0 through two launches; any mismatch is diagnosed with the k = 0 server's logprobs."""
    from specbench.cli.app import app
    from specbench.models.default_model import packaged_gguf

    binary = shlex.quote(str(llama_server_binary()))
    gguf = packaged_gguf()
    result = CliRunner().invoke(app, ["check-lossless", "--server-cmd", f"{binary} -m {{model}} {SPEC} {COMMON}",
                                      "--server-baseline-cmd", f"{binary} -m {{model}} {COMMON}", "--target", gguf,
                                      "--draft", gguf, "-k", "3", "--server-log-dir", str(tmp_path),
                                      "--data-dir", str(data_dir()), "--shots", "0", "--num-prompts", "2",
                                      "--max-tokens", "24", "--show", "2"],
                                env={"HF_HUB_OFFLINE": "1"}, catch_exceptions=False)
    assert "turns identical" in result.output and (tmp_path / "k3.log").is_file(), result.output
    if "NOT LOSSLESS" in result.output or result.exit_code != 0:
        assert "near-tie" in result.output or "divergent" in result.output, result.output
    else:
        assert "2/2 turns identical" in result.output
