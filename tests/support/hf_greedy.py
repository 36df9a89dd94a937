"""HF transformers' own greedy decoding, the yardstick of the engine-vs-HF tests (fp32, no EOS stop), and the tiny
GSM8K prompts those tests decode."""

from __future__ import annotations

import torch

PROMPT_LENGTHS = (6, 33, 13, 21, 9)  # varied: short prompts, and one past a few KV blocks


def hf_greedy_outputs(model, prompt_ids: list[list[int]], max_tokens: int) -> list[list[int]]:
    """[num_prompts] the new tokens of `model.generate` (greedy, exactly max_tokens each) for each prompt alone."""
    model.generation_config.eos_token_id = None
    outs = []
    for ids in prompt_ids:
        x = torch.tensor([ids])
        y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_tokens, do_sample=False,
                           pad_token_id=0)
        outs.append(y[0, len(ids):].tolist())
    return outs


def tiny_prompt_ids(lengths: tuple[int, ...] = PROMPT_LENGTHS) -> list[list[int]]:
    """GSM8K test questions through the tiny tokenizer, cut to `lengths`."""
    from tests.support.tiny_models import gsm8k_questions, load_tiny_tokenizer

    tok = load_tiny_tokenizer()
    return [tok(q)["input_ids"][:n] for q, n in zip(gsm8k_questions("test")[:len(lengths)], lengths)]


def hf_greedy_of(checkpoint, prompt_ids: list[list[int]], max_tokens: int) -> list[list[int]]:
    """hf_greedy_outputs of the fp32 transformers model at `checkpoint` (a directory)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    return hf_greedy_outputs(model, prompt_ids, max_tokens)
