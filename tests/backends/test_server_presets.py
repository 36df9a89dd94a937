"""The --server-cmd presets build each launch from (method, num-steps, tree shape): the command lines per server
(no server started), MTP and tree settings included, and one-line refusals of what a server cannot run."""

from __future__ import annotations

import ast
import json
from collections import Counter

import pytest

from specbench.backends.launching_backend import launch_argv, launch_name
from specbench.backends.server_presets import max_tree_nodes, vllm_token_tree
from specbench.backends.server_template import (
    LaunchValues,
    check_template,
    render,
    resolve_template,
)
from specbench.bench.grid import build_grid
from specbench.runs.cell_key import launch_group
from specbench.bench.validate import validate_config
from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.runs.sweep_config import SweepConfig
from specbench.speculation.draft_shape import CHAIN, DraftShape

TARGET, DRAFT = "/m/target", "/m/head"


def _argv(preset: str, method: str, num_steps: int, shape: DraftShape = CHAIN) -> list[str]:
    template = resolve_template(f"preset:{preset}", None, num_steps, method, shape)
    return list(render(template, LaunchValues(num_steps, method, 8123, TARGET, DRAFT, shape)))


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize(
    "method, algorithm, has_draft", [("eagle", "EAGLE", True), ("eagle3", "EAGLE3", True), ("mtp", "NEXTN", False),
                                     ("draft", "STANDALONE", True)])
def test_sglang_maps_methods_and_the_tree_shape(method, algorithm, has_draft):
    chain = _argv("sglang", method, 3)
    assert _flag(chain, "--speculative-algorithm") == algorithm
    assert (_flag(chain, "--speculative-num-steps"), _flag(chain, "--speculative-eagle-topk"),
            _flag(chain, "--speculative-num-draft-tokens")) == ("3", "1", "4")  # k + 1: SGLang counts the root
    assert ("--speculative-draft-model-path" in chain) == has_draft
    tree = _argv("sglang", method, 5, DraftShape(4, 8))
    assert (_flag(tree, "--speculative-num-steps"), _flag(tree, "--speculative-eagle-topk"),
            _flag(tree, "--speculative-num-draft-tokens")) == ("5", "4", "9")
    no_budget = _argv("sglang", method, 3, DraftShape(2))
    assert _flag(no_budget, "--speculative-num-draft-tokens") == str(2 + 2 * 2 * 2 + 1)  # every candidate + root


def test_vllm_speculative_config_per_method_and_its_static_tree():
    def config(method: str, num_steps: int, shape: DraftShape = CHAIN) -> dict:
        return json.loads(_flag(_argv("vllm", method, num_steps, shape), "--speculative-config"))

    assert config("draft", 3) == {"method": "draft_model", "model": DRAFT, "num_speculative_tokens": 3}
    assert config("eagle3", 3) == {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3}
    assert config("mtp", 2) == {"method": "mtp", "num_speculative_tokens": 2}  # the target's own MTP layers
    tree = config("eagle", 3, DraftShape(2))
    paths = ast.literal_eval(tree["speculative_token_tree"])
    assert paths == [(0,), (1,), (0, 0), (1, 0), (0, 0, 0), (1, 0, 0)] and tree["num_speculative_tokens"] == 6
    assert config("eagle3", 3, DraftShape(2, 6))["num_speculative_tokens"] == 6  # the budget it drafts anyway
    for level in range(1, 3):  # every node of a level has the same number of children (vLLM's requirement)
        children = Counter(p[:-1] for p in paths if len(p) == level + 1)
        assert set(children) == {p for p in paths if len(p) == level} and len(set(children.values())) == 1
    assert vllm_token_tree(1, 3) == [(0,), (1,), (2,)]


@pytest.mark.parametrize(
    "preset, method, shape, message",
    [
        ("vllm", "eagle3", DraftShape(2, 5), "--num-draft-tokens must be 6 or left out"),
        ("vllm", "draft", DraftShape(2), "vLLM drafts trees for eagle, eagle3, mtp only"),
        ("llama-server", "mtp", DraftShape(2), "llama.cpp drafts chains only"),
        ("llama-server-ngram", "ngram", DraftShape(4, 8), "llama.cpp drafts chains only"),
    ],
)
def test_a_preset_refuses_what_its_server_cannot_run_in_one_line(preset, method, shape, message):
    with pytest.raises(SpecbenchError, match=message) as err:
        resolve_template(f"preset:{preset}", None, 3, method, shape)
    assert str(err.value).startswith(f"--server-cmd preset:{preset} cannot launch method {method}, num-steps 3")
    assert "\n" not in str(err.value)


def test_specbench_serve_takes_the_tree_shape():
    assert "--eagle-topk" not in _argv("specbench", "draft", 3)
    tree = _argv("specbench", "draft", 3, DraftShape(2, 6))
    assert (_flag(tree, "--num-steps"), _flag(tree, "--eagle-topk"), _flag(tree, "--num-draft-tokens")) == ("3", "2",
                                                                                                            "6")
    assert "--num-draft-tokens" not in _argv("specbench", "eagle3", 3, DraftShape(2))  # every node the steps give


def test_llama_server_runs_mtp_from_the_target_gguf_and_a_draft_lm_otherwise():
    mtp = _argv("llama-server", "mtp", 3)
    assert _flag(mtp, "--spec-type") == "draft-mtp" and "-md" not in mtp and _flag(mtp, "--spec-draft-n-max") == "3"
    draft = _argv("llama-server", "draft", 2)
    assert _flag(draft, "--spec-type") == "draft-simple" and _flag(draft, "-md") == DRAFT
    assert _argv("llama-server", "mtp", 0) == _argv("llama-server", "draft", 0)  # the baseline drafts nothing


def test_custom_templates_get_the_shape_placeholders():
    template = "srv --port {port} --steps {num_steps} --topk {eagle_topk} --tokens {num_draft_tokens}"
    check_template(template)
    argv = render(template, LaunchValues(4, "eagle3", 1, TARGET, None, DraftShape(4, 10)))
    assert list(argv[-6:]) == ["--steps", "4", "--topk", "4", "--tokens", "11"]
    assert max_tree_nodes(4, CHAIN) == 4 and max_tree_nodes(2, DraftShape(3)) == 3 + 9


def test_a_server_sweep_over_topk_and_draft_tokens_is_one_command():
    config = SweepConfig(backend="openai", server_cmd="preset:sglang", num_steps=(3,), eagle_topk=(1, 4),
                         num_draft_tokens=(8, 16), engine=EngineConfig(method="eagle3", target=TARGET, draft=DRAFT))
    validate_config(config)  # every launch renders before anything starts
    groups = list(dict.fromkeys(launch_group(key) for key in build_grid(config)))
    assert groups == [(0, 1, 0), (3, 1, 0), (3, 4, 8), (3, 4, 16)]
    launches = [launch_argv(config, k, 8123, DraftShape(topk, budget or None)) for k, topk, budget in groups]
    assert "--speculative-algorithm" not in launches[0]
    assert [_flag(list(a), "--speculative-num-draft-tokens") for a in launches[1:]] == ["4", "9", "17"]
    assert [launch_name(k, DraftShape(t, b or None)) for k, t, b in groups] == ["k0", "k3", "k3-top4-n8",
                                                                                 "k3-top4-n16"]
    refused = SweepConfig(backend="openai", server_cmd="preset:llama-server", num_steps=(3,), eagle_topk=(1, 2),
                          engine=EngineConfig(method="draft", target=TARGET, draft=DRAFT))
    with pytest.raises(SpecbenchError, match="llama.cpp drafts chains only"):
        validate_config(refused)
