"""Tiny targets, fitted EAGLE heads in every dialect (disk-cached), prompts and greedy oracles."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.support.eagle_heads import MAX_TOKENS, VARIANTS, build_head_dir, build_target, run_engine
from tests.support.tiny_models import gsm8k_questions, load_tiny_tokenizer


@pytest.fixture(scope="session")
def eagle_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("eagle")


@pytest.fixture(scope="session")
def target_dir(eagle_root):
    """target name ("t2" | "t4") -> checkpoint directory."""
    return lambda name: build_target(eagle_root, name)


@pytest.fixture(scope="session")
def head_dir(eagle_root, target_dir):
    """variant name -> head directory (fitted once per recipe and target, then cached on disk)."""
    return lambda variant: build_head_dir(eagle_root / "heads", variant, target_dir(VARIANTS[variant].target))


@pytest.fixture(scope="session")
def prompt_ids() -> list[list[int]]:
    """gsm8k test questions (the heads were fitted on train questions), 6..40 tokens."""
    tok = load_tiny_tokenizer()
    lengths = [6, 40, 13, 27, 9, 33, 18, 22]
    return [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:8], lengths)]


@pytest.fixture(scope="session")
def plain_outputs(target_dir, prompt_ids):
    """target name -> plain (non-speculative) greedy outputs of the engine."""
    cache: dict[str, list[list[int]]] = {}

    def get(name: str) -> list[list[int]]:
        if name not in cache:
            _, outs = run_engine(target_dir(name), prompt_ids)
            cache[name] = [list(o.output_token_ids) for o in outs]
        return cache[name]

    return get


@pytest.fixture(scope="session")
def hf_outputs(target_dir, prompt_ids):
    """target name -> HF transformers greedy generate on the same weights: the independent oracle."""
    from transformers import AutoModelForCausalLM

    cache: dict[str, list[list[int]]] = {}

    def get(name: str) -> list[list[int]]:
        if name not in cache:
            model = AutoModelForCausalLM.from_pretrained(target_dir(name), dtype=torch.float32).eval()
            model.generation_config.eos_token_id = None
            outs = []
            for ids in prompt_ids:
                x = torch.tensor([ids])
                y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=MAX_TOKENS, do_sample=False,
                                   pad_token_id=0)
                outs.append(y[0, len(ids):].tolist())
            cache[name] = outs
        return cache[name]

    return get
