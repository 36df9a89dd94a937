"""What the n-gram proposer needs to draft and be accepted on a tiny random target: a target whose next token
depends on the last few tokens only, and prompts that contain the target's own continuation of their end.

The tiny target's content heads (1 and 3 of each layer) attend by content over the whole context, so its next token
depends on everything seen and a copied span is almost never continued as before. Silencing their outputs (o_proj
columns) leaves the positional heads: layer 0 sees tokens t and t - 1, layer 1 adds t - 2, so the target is (up to
the positional heads' ~e^-6 leakage) a third-order Markov chain, and a span it produced once it produces again after
the same three tokens. A prompt q + g + filler + g[:3] (g the target's greedy continuation of q) then continues with
g[3:], which prompt lookup drafts from the context and the target accepts; past the end of g the lookup proposes the
filler, which is rejected, so rounds of every shape occur (acceptance ~0.55 per position at k = 3).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from specbench.selftest.tiny import NUM_LAYERS, VOCAB_SIZE, random_prompts, target_shape

CONTENT_HEADS = (1, 3)  # tiny.py: heads 0 and 2 are positional, the others attend by content
SPAN_TOKENS = 12  # g: the target's continuation copied into the prompt
FILLER_TOKENS = 5  # random tokens between the copy and its restart
RESTART_TOKENS = 3  # g[:3] ends the prompt: the Markov order of the target


def build_copying_target(target_dir: str | Path, out_dir: str | Path) -> str:
    """Write the tiny target with its content heads silenced (same config) to `out_dir`."""
    weights = load_file(Path(target_dir) / "model.safetensors")
    shape = target_shape(target_dir)
    d = shape.head_dim
    for i in range(NUM_LAYERS):
        o_proj = weights[f"model.layers.{i}.self_attn.o_proj.weight"]  # [hidden, num_heads * head_dim]
        assert o_proj.shape[1] == shape.q_size
        for head in CONTENT_HEADS:
            o_proj[:, head * d : (head + 1) * d] = 0.0
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(json.loads((Path(target_dir) / "config.json").read_text()), indent=2))
    save_file({k: v.contiguous() for k, v in weights.items()}, out / "model.safetensors", metadata={"format": "pt"})
    return str(out)


def repeating_prompts(target_dir: str, num: int, seed: int, engine_config) -> list[list[int]]:
    """q + g + filler + g[:RESTART_TOKENS] per prompt; g from plain greedy decoding of `engine_config` (its target
    replaced by `target_dir`, speculation off)."""
    from dataclasses import replace

    from specbench.llm import LLM
    from specbench.sampling_params import SamplingParams

    heads = random_prompts(num, seed=seed, min_len=4, max_len=10)
    plain = replace(engine_config, target=target_dir, method="none", draft=None, max_num_steps=0)
    spans = [list(o.output_token_ids) for o in
             LLM(plain).generate(heads, SamplingParams(max_tokens=SPAN_TOKENS, ignore_eos=True))]
    gen = torch.Generator().manual_seed(3_000_017 + seed)  # never replays a build seed's stream
    fillers = torch.randint(4, VOCAB_SIZE, (num, FILLER_TOKENS), generator=gen).tolist()
    return [q + g + f + g[:RESTART_TOKENS] for q, g, f in zip(heads, spans, fillers)]
