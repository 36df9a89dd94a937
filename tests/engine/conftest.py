"""Shared tiny target/draft pair and prompts for engine tests."""

from __future__ import annotations

import pytest
import torch

from tiny_models import build_tiny_model, derive_draft, gsm8k_questions, load_tiny_tokenizer


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
def hf_greedy(tiny_pair, prompt_ids):
    """HF transformers' own greedy generate on the same weights: the independent oracle."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_pair[0], dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None

    def run(max_new_tokens: int) -> list[list[int]]:
        outs = []
        for ids in prompt_ids:
            x = torch.tensor([ids])
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, do_sample=False,
                               pad_token_id=0)
            outs.append(y[0, len(ids):].tolist())
        return outs

    return run
