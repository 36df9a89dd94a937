"""The gate's structured stage (opt-in, issue 46): the JSON workload with speculation off and on through the embedded
engine; the clean engine passes, a grammar mutant fails it."""

from __future__ import annotations

import pytest

from specbench.gate.stages import DEFAULT_STAGES, STAGES
from tests.gate.conftest import engine_args, run_gate_cli, stage_rows


def test_the_structured_stage_is_opt_in():
    assert "structured" in STAGES and "structured" not in DEFAULT_STAGES


@pytest.mark.slow  # ~4-9 s on 2 busy cores: the -m 'not slow' subset stays under 5 min
@pytest.mark.parametrize("inject,expected", [
    (None, 0), pytest.param("grammar-mask-shifted", 1, marks=pytest.mark.slow)])
def test_structured_stage_passes_clean_and_fails_a_grammar_mutant(gate_pair, tmp_path, monkeypatch, capsys, inject,
                                                                  expected):
    pytest.importorskip("llguidance")
    args = [*engine_args(gate_pair), "--results-dir", str(tmp_path), "--stages", "structured",
            "--structured-max-tokens", "48", "--structured-limit", "12", "--quiet"]
    if inject is not None:
        args += ["--inject", inject]
    code, out, err = run_gate_cli(args, monkeypatch, capsys)
    assert code == expected, out + err
    assert stage_rows(out)["structured"] == ("PASS" if expected == 0 else "FAIL"), out


# The grammar mutants a plain OpenAI request can reach through `specbench serve --inject`: the pool is tight and the
# 12 schemas run at once, so requests are preempted and resumed (grammar-not-restored needs that). The other two,
# grammar-marker-in-drafts-unmasked (a reasoning target) and grammar-tree-sibling-state (a server drafting trees):
# tests/gate/test_structured_http_marker_tree.py.
HTTP_GRAMMAR_FAULTS = ("grammar-advanced-over-rejected", "grammar-mask-shifted", "grammar-bonus-unmasked",
                       "grammar-not-restored")


@pytest.mark.slow  # a server per fault: ~2-3 min on 2 busy cores
def test_structured_stage_over_http_catches_serve_inject(gate_pair, tmp_path, monkeypatch, capsys):
    """`specbench gate --base-url` (the server's own k, no off side): a clean `specbench serve` passes, one built with
    `--inject` of each grammar mutant above fails (its answers break their grammar, judged from the text alone)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("llguidance")
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server
    from tests.support.tiny_models import data_dir

    engine = EngineConfig(target=str(gate_pair.target), method="draft", draft=str(gate_pair.draft), device="cpu",
                          kv_cache_gb=0.0004, max_num_steps=3)  # a few blocks: 12 requests at once preempt
    for inject, expected in ((None, "PASS"), *((name, "FAIL") for name in HTTP_GRAMMAR_FAULTS)):
        with start_server(ServeConfig(engine, served_model_name="tiny"), fault=injection(inject)) as server:
            args = ["--base-url", server.url, "-k", "3", "--data-dir", str(data_dir()), "--results-dir",
                    str(tmp_path / f"r-{inject}"), "--tokenizer", str(gate_pair.target),  # judges cut answers
                    "--stages", "structured", "--structured-max-tokens", "48", "--concurrency", "12",
                    "--structured-limit", "12", "--quiet"]
            code, out, err = run_gate_cli(args, monkeypatch, capsys)
        assert stage_rows(out)["structured"] == expected, (inject, out + err)
        assert "no speculation-off side" in out
