"""Shared runs of the hybrid (Qwen3-Next) tests: the checkpoints, HF's greedy outputs, an engine stepped with the
state oracle after every step, and a record of each verify's draft counts (zero-draft rows beside drafting ones)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from specbench import LLM, SamplingParams
from specbench.check.state_oracle import state_diffs
from specbench.runtime.hooks import PhaseHooks

MAX_TOKENS = 12
# 10 prompts at concurrency 10: every round batches them all; lengths straddle blocks of 4 and the conv window.
PROMPT_LENGTHS = (6, 33, 13, 21, 9, 17, 11, 25, 8, 14)
NGRAM = {"method": "ngram", "ngram_min": 1, "ngram_max": 3, "max_num_steps": 3}


def hybrid_llm(target, fault=None, **kwargs) -> LLM:
    # SPECBENCH_TEST_DEVICE=cuda (scripts/gpu_*.sh): the same tests on the GPU, against the same CPU references
    device = os.environ.get("SPECBENCH_TEST_DEVICE", "cpu")
    options = {"dtype": "fp32", "device": device, "block_size": 4, "max_concurrency": 10, **kwargs}
    if device != "cpu" and "kv_cache_gb" not in options and "num_kv_blocks" not in options:
        # a fixed pool, not a share of free memory: the GPU scripts run these beside the CUDA selftest's workers
        options["kv_cache_gb"] = 0.25
    return LLM(str(target), fault=fault, **options)


class _RecordingHooks(PhaseHooks):
    def __init__(self, inner: PhaseHooks, seen: list[list[int]]) -> None:
        self.inner, self.seen = inner, seen

    def state_commit_requests(self, num_draft_tokens: list[int]) -> list[bool]:
        self.seen.append(list(num_draft_tokens))
        return self.inner.state_commit_requests(num_draft_tokens)

    def state_commit_rows(self, part, num_accepted, num_draft_tokens):
        return self.inner.state_commit_rows(part, num_accepted, num_draft_tokens)


def record_commits(llm: LLM) -> list[list[int]]:
    """Each state commit's per-request draft counts, in batch order (filled as the engine runs): the step runner's
    hooks wrapped by one that records what the commit asks."""
    seen: list[list[int]] = []
    runner = llm.engine.step_runner
    runner.hooks = _RecordingHooks(runner.hooks, seen)
    return seen


def run_with_oracle(llm: LLM, prompts, max_tokens: int | Sequence[int] = MAX_TOKENS, every: int | None = 1):
    """(outputs by request order, the worst INV-STATE difference seen, the number of slots checked): the oracle
    recomputes each running request's state after every `every`-th step (None: never). `max_tokens`: for every
    request, or one per request (requests finishing at different steps shrink the batch)."""
    engine = llm.engine
    limits = [max_tokens] * len(prompts) if isinstance(max_tokens, int) else list(max_tokens)
    ids = [engine.add_request(p, SamplingParams(max_tokens=n, ignore_eos=True)) for p, n in zip(prompts, limits)]
    outputs, worst, num_checked, step = {}, 0.0, 0, 0
    while engine.has_unfinished():
        for out in engine.step():
            outputs[out.request_id] = out
        step += 1
        if every is not None and step % every == 0:
            for diff in state_diffs(engine):
                num_checked += 1
                worst = max(worst, diff.conv_max_abs, diff.recurrent_max_abs)
    return [outputs[i] for i in ids], worst, num_checked


# the execution paths a Mamba-2 hybrid target's engine takes (verify, chunked scan, state write and commit)
MAMBA2_PATHS = {"hybrid.mamba2_verify", "hybrid.mamba2_chunked", "hybrid.state_write", "hybrid.state_commit"}


def output_tokens(outs) -> list[list[int]]:
    return [list(o.output_token_ids) for o in outs]


def build_target_dirs(root: Path, build: Callable, target: str, linear_attn_class: str) -> Path:
    """`root` with a tiny hybrid of `build` (tests/support/tiny_hybrid.py) at `target` (seed 0), its MoE twin at
    "moe" (seed 3) and a one-layer Qwen3 draft LM at "draft"; the target's first layer is transformers'
    `linear_attn_class` (the architecture the HF greedy reference runs)."""
    from tests.support.tiny_models import build_tiny_model

    dense = build(root / target, seed=0)
    build(root / "moe", seed=3, moe=True)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    assert type(dense.model.layers[0].linear_attn).__name__ == linear_attn_class
    return root
