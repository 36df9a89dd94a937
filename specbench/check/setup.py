"""What a check runs on, and how it builds engines (debug invariants on or off per engine)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace

from specbench.llm import LLM


@dataclass(frozen=True)
class CheckSetup:
    target: str
    method: str
    draft: str | None
    num_steps: int
    prompts: tuple  # [num_prompts] str or tuple of token ids
    max_tokens: int = 16
    dtype: str = "fp32"
    device: str = "cpu"
    inject: str | None = None
    block_size: int = 4
    kv_cache_gb: float = 0.05
    max_concurrency: int = 4
    seed: int = 0
    engine_kwargs: dict = field(default_factory=dict)  # extra EngineConfig fields (ngram sizes, tokenizer, ...)

    def with_inject(self, inject: str | None) -> "CheckSetup":
        return replace(self, inject=inject)


@contextlib.contextmanager
def debug_invariants(enabled: bool):
    """Backends read the switch when built: engines built inside keep this setting for their lifetime."""
    old = os.environ.get("SPECBENCH_DEBUG_INVARIANTS")
    os.environ["SPECBENCH_DEBUG_INVARIANTS"] = "1" if enabled else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SPECBENCH_DEBUG_INVARIANTS", None)
        else:
            os.environ["SPECBENCH_DEBUG_INVARIANTS"] = old


def build_llm(setup: CheckSetup, *, speculative: bool = True, invariants: bool = False, **overrides) -> LLM:
    """The setup's engine; speculative=False gives the clean plain-decoding reference (no fault, no draft)."""
    kwargs = dict(dtype=setup.dtype, device=setup.device, block_size=setup.block_size, seed=setup.seed,
                  max_concurrency=setup.max_concurrency, **setup.engine_kwargs)
    if "num_kv_blocks" not in overrides:
        kwargs["kv_cache_gb"] = setup.kv_cache_gb
    kwargs.update(overrides)
    with debug_invariants(invariants):
        if not speculative:
            return LLM(setup.target, **kwargs)
        return LLM(setup.target, method=setup.method, draft=setup.draft, num_steps=setup.num_steps,
                   inject=setup.inject, **kwargs)


def prompt_list(setup: CheckSetup) -> list:
    return [p if isinstance(p, str) else list(p) for p in setup.prompts]


def forced_preemption_overrides(setup: CheckSetup, max_num_steps: int | None = None) -> dict:
    """Engine overrides whose KV pool admits a full batch of prompts but not their growth, so running requests are
    preempted; never smaller than what the longest request needs alone (it must be able to finish)."""
    def blocks(num_tokens: int) -> int:
        return -(-num_tokens // setup.block_size)

    extra = setup.max_tokens + (max_num_steps or setup.num_steps) + 1
    alone = max(blocks(len(p) + extra) for p in setup.prompts) + 1
    batch = sum(sorted(blocks(len(p) + 1) for p in setup.prompts)[: setup.max_concurrency]) + 1
    return {"num_kv_blocks": max(alone, batch)}


def num_preemptions(llm: LLM) -> int:
    return sum(s.num_preempted for s in llm.engine.step_stats)
