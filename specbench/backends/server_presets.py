"""`--server-cmd preset:NAME`: one launch template per server, built for what one launched server serves (method,
num-steps, draft tree shape), so a server sweep over k, --eagle-topk and --num-draft-tokens is one command.

Each preset maps specbench's method names to the server's own and refuses, in one line, what the server cannot run.
Flags, from each server's own docs (checked 2026-11):
- SGLang (docs.sglang.io, "Speculative Decoding"): `--speculative-algorithm EAGLE | EAGLE3 | NEXTN (MTP) |
  STANDALONE (a draft LM)`, `--speculative-num-steps` (depth), `--speculative-eagle-topk` (branching per step),
  `--speculative-num-draft-tokens` (verified tokens per round, the root included: k + 1 for a chain).
- vLLM (docs.vllm.ai, config/speculative.py `SpeculativeMethod`, features/speculative_decoding/mtp): the
  `--speculative-config` JSON takes method `draft_model | eagle | eagle3 | mtp` (the generic MTP name; the per-model
  ones such as `deepseek_mtp` are folded into it) and `num_speculative_tokens`; trees are a static
  `speculative_token_tree`, a list of paths of sibling ranks (vllm-project/vllm#20401). vLLM's tree drafting counts
  drafts per level and divides them by the previous level's, so every node of a level has the same number of
  children: the preset branches `eagle_topk` ways at the root and drafts a chain of depth k under each branch
  (eagle_topk x k nodes, also num_speculative_tokens). It runs on vLLM's TREE_ATTN attention backend (set
  VLLM_ATTENTION_BACKEND=TREE_ATTN in the server's environment).
- llama.cpp (`llama-server --help`; MTP from ggml-org/llama.cpp#22673, builds after 2026-05-16):
  `--spec-type draft-simple` with `-md` (a draft LM), `--spec-type draft-mtp` (the GGUF's own MTP head),
  `--spec-type ngram-simple`; `--spec-draft-n-max` drafts per round. No tree drafting.
- specbench serve: its --num-steps, and for trees its --eagle-topk and --num-draft-tokens (drafted nodes, the root
  excluded; left out: every node the steps and top-k give), as the embedded engine's sweep takes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from specbench.errors import SpecbenchError
from specbench.registry import Registry
from specbench.speculation.draft_shape import CHAIN, DraftShape


@dataclass(frozen=True, slots=True)
class LaunchPoint:
    """What one launched server serves."""

    method: str  # specbench's --method
    num_steps: int  # > 0 (k = 0 launches the preset's baseline)
    shape: DraftShape = CHAIN

    def describe(self) -> str:
        return f"method {self.method}, num-steps {self.num_steps}, {self.shape.label()}"


class ServerPreset(Protocol):
    baseline: str  # the num-steps 0 template

    def speculative(self, point: LaunchPoint) -> str:
        """The template of one speculative launch ({port} {model} {draft} {host} left to fill); raises
        SpecbenchError, one line, for what the server cannot run."""
        ...


SERVER_PRESETS: Registry[ServerPreset] = Registry("--server-cmd preset")


def max_tree_nodes(num_steps: int, shape: DraftShape) -> int:
    """Drafted nodes per round: the budget, else every candidate a top-k tree of depth k creates (topk at the
    first step, topk x topk at each later one), k for a chain."""
    if not shape.is_tree:
        return num_steps
    if shape.num_draft_tokens is not None:
        return shape.num_draft_tokens
    return shape.eagle_topk + (num_steps - 1) * shape.eagle_topk * shape.eagle_topk


def _refuse(preset: str, point: LaunchPoint, why: str) -> SpecbenchError:
    return SpecbenchError(f"--server-cmd preset:{preset} cannot launch {point.describe()}: {why}")


_LLAMA_TAIL = "--host {host} --port {port} --metrics -np 4 -c 4096"


@dataclass(frozen=True)
class LlamaServer:
    baseline: str = f"llama-server -m {{model}} {_LLAMA_TAIL}"

    def speculative(self, point: LaunchPoint) -> str:
        if point.shape.is_tree:
            raise _refuse("llama-server", point, "llama.cpp drafts chains only (use --eagle-topk 1)")
        if point.method == "mtp":  # the target GGUF's own MTP head: no draft model
            spec = "--spec-type draft-mtp"
        else:
            spec = "-md {draft} --spec-type draft-simple"
        return (f"llama-server -m {{model}} {spec} --spec-draft-n-max {point.num_steps} --spec-draft-n-min 0 "
                f"{_LLAMA_TAIL}")


@dataclass(frozen=True)
class LlamaServerNgram:
    baseline: str = f"llama-server -m {{model}} {_LLAMA_TAIL}"

    def speculative(self, point: LaunchPoint) -> str:
        if point.shape.is_tree:
            raise _refuse("llama-server-ngram", point, "llama.cpp drafts chains only (use --eagle-topk 1)")
        return f"llama-server -m {{model}} --spec-type ngram-simple --spec-draft-n-max {point.num_steps} {_LLAMA_TAIL}"


_VLLM_METHODS = {"draft": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp"}
_VLLM_TREE_METHODS = ("eagle", "eagle3", "mtp")  # vLLM's EAGLE proposer (MTP runs through it) drafts trees


def vllm_token_tree(num_steps: int, eagle_topk: int) -> list[tuple[int, ...]]:
    """`eagle_topk` branches at the root, a chain of depth `num_steps` under each, breadth-first: every node of a
    level has the same number of children, as vLLM's tree drafting requires."""
    return [(rank,) + (0,) * depth for depth in range(num_steps) for rank in range(eagle_topk)]


@dataclass(frozen=True)
class Vllm:
    baseline: str = "vllm serve {model} --host {host} --port {port}"

    def speculative(self, point: LaunchPoint) -> str:
        method = _VLLM_METHODS.get(point.method, "draft_model")  # other labels: a draft LM, as before trees
        config: dict[str, object] = {"method": method}
        if method != "mtp":
            config["model"] = "{draft}"
        num_tokens = point.num_steps
        if point.shape.is_tree:
            if point.method not in _VLLM_TREE_METHODS:
                raise _refuse("vllm", point, f"vLLM drafts trees for {', '.join(_VLLM_TREE_METHODS)} only")
            tree = vllm_token_tree(point.num_steps, point.shape.eagle_topk)
            budget = point.shape.num_draft_tokens
            if budget is not None and budget != len(tree):
                raise _refuse("vllm", point, f"vLLM's static trees branch alike per level: the preset drafts "
                              f"eagle_topk x num-steps = {len(tree)} tokens, so --num-draft-tokens must be {len(tree)} "
                              "or left out")
            config["speculative_token_tree"] = str(tree)
            num_tokens = len(tree)
        config["num_speculative_tokens"] = num_tokens
        # the JSON's braces doubled: the template fills {draft} and keeps the rest literal
        text = json.dumps(config).replace("{", "{{").replace("}", "}}").replace("{{draft}}", "{draft}")
        return f"vllm serve {{model}} --host {{host}} --port {{port}} --speculative-config '{text}'"


_SGLANG_ALGORITHMS = {"draft": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN"}
_SGLANG_BASE = "python -m sglang.launch_server --model-path {model} --host {host} --port {port} --enable-metrics"


@dataclass(frozen=True)
class Sglang:
    baseline: str = _SGLANG_BASE

    def speculative(self, point: LaunchPoint) -> str:
        algorithm = _SGLANG_ALGORITHMS.get(point.method, "STANDALONE")  # other labels: a draft LM, as before
        draft = "" if algorithm == "NEXTN" else " --speculative-draft-model-path {draft}"  # MTP: the target's
        num_draft_tokens = max_tree_nodes(point.num_steps, point.shape) + 1  # SGLang counts the root
        return (f"{_SGLANG_BASE} --speculative-algorithm {algorithm}{draft} --speculative-num-steps "
                f"{point.num_steps} --speculative-eagle-topk {point.shape.eagle_topk} --speculative-num-draft-tokens "
                f"{num_draft_tokens}")


DRAFTS_FROM_TARGET = ("ngram", "mtp")  # specbench's methods that take no --draft


@dataclass(frozen=True)
class SpecbenchServe:
    baseline: str = "specbench serve --target {model} --host {host} --port {port}"

    def speculative(self, point: LaunchPoint) -> str:
        tree = ""
        if point.shape.is_tree:
            tree = f" --eagle-topk {point.shape.eagle_topk}"
            if point.shape.num_draft_tokens is not None:
                tree += f" --num-draft-tokens {point.shape.num_draft_tokens}"
        # n-gram and the target's own MTP module draft from the target alone: no --draft (a hybrid target's n-gram
        # twin is launched this way by `specbench stress --server-cmd preset:specbench`)
        draft = "" if point.method in DRAFTS_FROM_TARGET else " --draft {draft}"
        return (f"specbench serve --target {{model}} --method {{method}}{draft} --num-steps {point.num_steps}{tree} "
                "--host {host} --port {port}")


SERVER_PRESETS.register("llama-server")(LlamaServer)
SERVER_PRESETS.register("llama-server-ngram")(LlamaServerNgram)
SERVER_PRESETS.register("vllm")(Vllm)
SERVER_PRESETS.register("sglang")(Sglang)
SERVER_PRESETS.register("specbench")(SpecbenchServe)
