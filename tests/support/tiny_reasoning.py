"""A tiny reasoning target (and its draft) from a tiny pair: Qwen3's shape of thinking, `<think>` and `</think>` as
added (non-special) tokens, a chat template whose generation prompt opens `<think>`, and a model that writes
`</think>` a few tokens into many of its answers (on the gate pair: 17 of the 32 JSON prompts within 48 tokens).

How a random model comes to end its thinking: one of its frequent early tokens (the stand-in) is relabelled. The
`</think>` row of the output head is the stand-in's scaled by HEAD_GAIN (> 1: its logit wins wherever the stand-in's
is the positive maximum), its embedding row the stand-in's, so the model writes `</think>` where it wrote the stand-in
and goes on as before. The draft gets the same rows from its own weights: it drafts the marker where the target
writes it, which puts `</think>` inside the drafts (the grammar-marker-in-drafts mutant's ground).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from tests.support.tiny_models import CHAT_TEMPLATE, load_tiny_tokenizer

THINK, THINK_END = "<think>", "</think>"
REASONING_TEMPLATE = CHAT_TEMPLATE.replace("<|im_start|>assistant\n{% endif %}",
                                           "<|im_start|>assistant\n" + THINK + "\n{% endif %}")
HEAD_GAIN = 1.05
# Output positions where the stand-in is looked for: not the first token (the prefill's, never a draft), early enough
# that a short answer budget still has room for the constrained answer after it.
FIRST_POSITIONS = range(1, 10)


def reasoning_tokenizer():
    from tokenizers import AddedToken

    tokenizer = load_tiny_tokenizer()
    tokenizer.add_tokens([AddedToken(THINK, special=False, normalized=False),
                          AddedToken(THINK_END, special=False, normalized=False)])
    tokenizer.chat_template = REASONING_TEMPLATE
    return tokenizer


def _write(src: Path, dst: Path, tokenizer, stand_in: int | None) -> None:
    """`src` with two more vocabulary rows: `<think>` (a copy of the newline token's: it is only ever read) and
    `</think>` (the stand-in's; without one, for the probe, all-zero head rows: logit 0, below a peaky head's maximum,
    so neither is written)."""
    weights = load_file(src / "model.safetensors")
    embed, head = weights["model.embed_tokens.weight"], weights["lm_head.weight"]
    (newline,) = tokenizer.encode("\n", add_special_tokens=False)
    source = newline if stand_in is None else stand_in
    end_head = torch.zeros_like(head[0]) if stand_in is None else head[stand_in] * HEAD_GAIN
    weights["model.embed_tokens.weight"] = torch.cat([embed, embed[newline][None], embed[source][None]])
    weights["lm_head.weight"] = torch.cat([head, torch.zeros_like(head[:1]), end_head[None]])
    dst.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, dst / "model.safetensors")
    config = json.loads((src / "config.json").read_text())
    config["vocab_size"] = len(tokenizer)
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer.save_pretrained(dst)


@torch.no_grad()
def _greedy(model_dir: Path, prompts: list[list[int]], num_tokens: int) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    return [model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=num_tokens,
                           min_new_tokens=num_tokens, pad_token_id=0)[0, len(prompt):].tolist() for prompt in prompts]


def pick_stand_in(outputs: list[list[int]], specials: set[int]) -> int:
    """The token that first appears at one of FIRST_POSITIONS in the most outputs (before any special token)."""
    counts: Counter = Counter()
    for output in outputs:
        seen: set[int] = set()
        for position, token in enumerate(output[: FIRST_POSITIONS.stop]):
            if token in specials:
                break
            if token not in seen and position in FIRST_POSITIONS:
                counts[token] += 1
            seen.add(token)
    return counts.most_common(1)[0][0]


def build_reasoning_pair(target: Path, draft: Path, out_dir: Path, prompts: list[list[int]]) -> tuple[Path, Path]:
    """`out_dir`/target and /draft: the tiny pair made a reasoning pair (see the module doc); `prompts`: chat prompts
    of the reasoning template (token ids) whose answers choose the stand-in. Returns their directories."""
    tokenizer = reasoning_tokenizer()
    probe = out_dir / "probe"
    _write(Path(target), probe, tokenizer, None)
    stand_in = pick_stand_in(_greedy(probe, prompts, FIRST_POSITIONS.stop), set(tokenizer.all_special_ids))
    _write(Path(target), out_dir / "target", tokenizer, stand_in)
    _write(Path(draft), out_dir / "draft", tokenizer, stand_in)
    return out_dir / "target", out_dir / "draft"
