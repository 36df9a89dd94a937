"""The structured stage over HTTP catches the last two grammar mutants through `specbench serve --inject` (issue 46):
grammar-marker-in-drafts-unmasked on a reasoning target (serve --reasoning-end '</think>' splits its answers into
reasoning_content and content; the stage judges the content), grammar-tree-sibling-state on a server drafting trees
(serve --eagle-topk / --num-draft-tokens). The clean servers pass the same runs."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.gate.conftest import run_gate_cli, stage_rows

pytestmark = pytest.mark.slow  # four servers and a reasoning pair built from the gate pair: ~1-2 min on 2 cores

pytest.importorskip("fastapi")
pytest.importorskip("llguidance")

NUM_CASES = 12
MAX_TOKENS = 48  # the reasoning target's thinking takes 1-9 of them (tests/support/tiny_reasoning.py)


@pytest.fixture(scope="module")
def reasoning_pair(gate_pair, tmp_path_factory):
    from specbench.workloads import get_workload
    from specbench.workloads.base import DataSource
    from tests.support.tiny_reasoning import build_reasoning_pair, reasoning_tokenizer

    tokenizer = reasoning_tokenizer()
    samples = get_workload("json_schema").load(DataSource(None, "synthetic"), NUM_CASES, 0).samples
    prompts = [tokenizer.encode(tokenizer.apply_chat_template(
        [{"role": "system", "content": s.system}, {"role": "user", "content": s.turns[0]}],
        add_generation_prompt=True, tokenize=False), add_special_tokens=False) for s in samples]
    return build_reasoning_pair(gate_pair.target, gate_pair.draft, tmp_path_factory.mktemp("reasoning_pair"),
                                prompts)


def _gate(server, target, tmp_path, name, monkeypatch, capsys, *extra) -> str:
    from tests.support.tiny_models import data_dir

    args = ["--base-url", server.url, "-k", "3", "--data-dir", str(data_dir()), "--results-dir", str(tmp_path / name),
            "--tokenizer", str(target),  # judges answers cut by length
            "--stages", "structured", "--structured-max-tokens", str(MAX_TOKENS), "--concurrency", "4",
            "--structured-limit", str(NUM_CASES), "--quiet", *extra]
    _, out, err = run_gate_cli(args, monkeypatch, capsys)
    return out + err


def test_marker_in_drafts_is_caught_over_http_on_a_reasoning_target(reasoning_pair, tmp_path, monkeypatch, capsys):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server

    target, draft = reasoning_pair
    engine = EngineConfig(target=str(target), method="draft", draft=str(draft), device="cpu", kv_cache_gb=0.05,
                          max_num_steps=3)
    config = ServeConfig(engine, served_model_name="tiny", reasoning_end="</think>")
    with start_server(config) as server:
        out = _gate(server, target, tmp_path, "clean", monkeypatch, capsys)
        assert stage_rows(out)["structured"] == "PASS", out
        assert "reasoning split off by {'server'" in out  # the stage read content, the reasoning came apart
        assert "grammar.reasoning_end_in_drafts" in server.loop.engine.paths_taken()
        # --reasoning-parser think (meant for inline reasoning) leaves a splitting server's answers alone, those
        # whose marker came first (no reasoning sent) included
        out = _gate(server, target, tmp_path, "parser", monkeypatch, capsys, "--reasoning-parser", "think")
        assert stage_rows(out)["structured"] == "PASS", out
        _check_whole_and_streamed_split(server.url)
    with start_server(config, fault=injection("grammar-marker-in-drafts-unmasked")) as server:
        out = _gate(server, target, tmp_path, "mutant", monkeypatch, capsys)
    assert stage_rows(out)["structured"] == "FAIL", out
    assert "answers break their grammar" in out


def _check_whole_and_streamed_split(url: str) -> None:
    """One answer that ends its thinking: message.reasoning_content + '</think>' + content is the model's text, and
    the streamed reasoning_content / content deltas concatenate to the same two parts."""
    from specbench.grammar.conformance import judge
    from specbench.workloads import get_workload
    from specbench.workloads.base import DataSource

    samples = get_workload("json_schema").load(DataSource(None, "synthetic"), NUM_CASES, 0).samples
    with httpx.Client(base_url=url, timeout=60) as client:
        for sample in samples:
            if sample.grammar.kind != "json_schema":
                continue
            body = {"messages": [{"role": "system", "content": sample.system},
                                 {"role": "user", "content": sample.turns[0]}],
                    "max_tokens": MAX_TOKENS, "temperature": 0,
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": "s", "schema": json.loads(sample.grammar.source), "strict": True}}}
            message = client.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
            if not message["content"]:
                continue  # cut while thinking: all of it reasoning
            streamed = client.post("/v1/chat/completions", json={**body, "stream": True}).text
            deltas = [json.loads(line[6:])["choices"][0]["delta"] for line in streamed.splitlines()
                      if line.startswith("data: {") and '"choices":[{' in line]
            assert "".join(d.get("reasoning_content", "") for d in deltas) == message["reasoning_content"]
            assert "".join(d.get("content", "") for d in deltas) == message["content"]
            assert "</think>" not in message["reasoning_content"]
            if judge(sample.grammar, message["content"]).is_conformant:
                return
    raise AssertionError("no answer ended its thinking with a conformant answer")


def test_tree_sibling_state_is_caught_over_http_on_a_tree_server(gate_pair, tmp_path, monkeypatch, capsys):
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.serve import ServeConfig, start_server
    from specbench.speculation.draft_shape import DraftShape

    engine = EngineConfig(target=str(gate_pair.target), method="draft", draft=str(gate_pair.draft), device="cpu",
                          kv_cache_gb=0.05, max_num_steps=3)
    config = ServeConfig(engine, served_model_name="tiny", draft_shape=DraftShape(2, 6))
    with start_server(config) as server:
        version = httpx.get(f"{server.url}/version").json()["speculative"]
        assert (version["eagle_topk"], version["num_draft_tokens"]) == (2, 6)
        out = _gate(server, gate_pair.target, tmp_path, "clean", monkeypatch, capsys)
        assert stage_rows(out)["structured"] == "PASS", out
        assert "grammar.tree_mask" in server.loop.engine.paths_taken()
    with start_server(config, fault=injection("grammar-tree-sibling-state")) as server:
        out = _gate(server, gate_pair.target, tmp_path, "mutant", monkeypatch, capsys)
    assert stage_rows(out)["structured"] == "FAIL", out
