"""Shared tiny target/draft pair and prompts for engine tests."""

from __future__ import annotations

import pytest
import torch

from tests.support.tiny_models import build_tiny_model, derive_draft, gsm8k_questions, load_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """(target_dir, draft_dir): a 2-layer llama and a perturbed copy of it."""
    root = tmp_path_factory.mktemp("pair")
    build_tiny_model(root / "target", "llama", num_layers=2, seed=0)
    derive_draft(root / "target", root / "draft", noise=0.15, seed=1)
    return str(root / "target"), str(root / "draft")


@pytest.fixture(scope="session")
def prompt_ids() -> list[list[int]]:
    """Real-text prompts of different lengths (6..40 tokens)."""
    tok = load_tiny_tokenizer()
    questions = gsm8k_questions("test")[:8]
    lengths = [6, 40, 13, 27, 9, 33, 18, 22]
    return [tok(q)["input_ids"][:n] for q, n in zip(questions, lengths)]


@pytest.fixture(scope="session")
def hf_greedy(tiny_pair, prompt_ids, engine_env):
    """HF transformers' own greedy generate on the same weights: the independent oracle (cached per length)."""
    from transformers import AutoModelForCausalLM

    device, dtype = engine_env
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    model = AutoModelForCausalLM.from_pretrained(tiny_pair[0], dtype=torch_dtype).to(device).eval()
    model.generation_config.eos_token_id = None
    cache: dict[int, list[list[int]]] = {}

    def run(max_new_tokens: int) -> list[list[int]]:
        if max_new_tokens not in cache:
            outs = []
            for ids in prompt_ids:
                x = torch.tensor([ids], device=device)
                y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                                   do_sample=False, pad_token_id=0)
                outs.append(y[0, len(ids):].tolist())
            cache[max_new_tokens] = outs
        return cache[max_new_tokens]

    return run


@pytest.fixture(scope="session")
def engine_env():
    """(device, dtype) the engine tests run on: CPU fp32 by default; the GPU script sets cuda and bf16/fp32."""
    import os

    return os.environ.get("SPECBENCH_TEST_DEVICE", "cpu"), os.environ.get("SPECBENCH_TEST_DTYPE", "fp32")

