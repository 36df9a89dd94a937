"""A tiny random Llama target without q/k/v/o biases, so models/decode_gemv.applies() holds and the fused
projections (kernels/gemv.py, and kernels/gemv_rope.py's RoPE + K/V store epilogue) run, on CPU under
TRITON_INTERPRET=1.

The selftest's biased tiny target (specbench/selftest/tiny.py, the default variant) builds its positional heads from
biases, and its head_dim of 16 keeps batches off the RoPE/K-V-store epilogue (tensor-core tiles need 16 dims per half
head). This one has head_dim 32 and sharp content attention (large q/k gain), so its next token depends on which
keys a query sees."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from specbench.selftest.tiny import VOCAB_SIZE, tiny_llama_config

NUM_LAYERS, HIDDEN, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, INTER = 2, 64, 4, 2, 32, 128
GAINS = {"lm_head": 4.0, "q_proj": 4.0, "k_proj": 4.0, "v_proj": 2.0, "o_proj": 2.0}  # others: 0.5


def _weights(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q, kv = NUM_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM
    shapes = {"model.embed_tokens.weight": (VOCAB_SIZE, HIDDEN), "model.norm.weight": (HIDDEN,),
              "lm_head.weight": (VOCAB_SIZE, HIDDEN)}
    for i in range(NUM_LAYERS):
        layer = {"input_layernorm.weight": (HIDDEN,), "post_attention_layernorm.weight": (HIDDEN,),
                 "self_attn.q_proj.weight": (q, HIDDEN), "self_attn.k_proj.weight": (kv, HIDDEN),
                 "self_attn.v_proj.weight": (kv, HIDDEN), "self_attn.o_proj.weight": (HIDDEN, q),
                 "mlp.gate_proj.weight": (INTER, HIDDEN), "mlp.up_proj.weight": (INTER, HIDDEN),
                 "mlp.down_proj.weight": (HIDDEN, INTER)}
        shapes.update({f"model.layers.{i}.{k}": v for k, v in layer.items()})
    weights = {}
    for name, shape in sorted(shapes.items()):
        if name.endswith("norm.weight"):
            weights[name] = torch.ones(shape)
        elif name.endswith("embed_tokens.weight"):
            rows = torch.randn(shape, generator=gen)
            weights[name] = rows / rows.pow(2).mean(-1, keepdim=True).sqrt()
        else:
            gain = next((g for key, g in GAINS.items() if key in name), 0.5)
            weights[name] = torch.randn(shape, generator=gen) * (gain / shape[1] ** 0.5)
    return weights


def build_no_bias_target(out_dir: str | Path, *, seed: int = 0) -> str:
    """Write the HF directory of a bias-free tiny target; returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = {**tiny_llama_config(), "attention_bias": False, "head_dim": HEAD_DIM, "hidden_size": HIDDEN,
              "intermediate_size": INTER, "num_hidden_layers": NUM_LAYERS, "num_attention_heads": NUM_HEADS,
              "num_key_value_heads": NUM_KV_HEADS}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file(_weights(seed), out / "model.safetensors", metadata={"format": "pt"})
    return str(out)


def build_cycling_target(out_dir: str | Path, *, seed: int = 0) -> str:
    """The selftest's tiny target with its biases dropped: its positional heads keep all-zero keys (uniform
    attention), so greedy output soon falls into short cycles, which n-gram drafting copies from the context."""
    from safetensors.torch import load_file

    from specbench.selftest.tiny import build_tiny_pair

    target, _ = build_tiny_pair(Path(out_dir) / "pair", seed=seed)
    out = Path(out_dir) / "cycling"
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((Path(target) / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "attention_bias": False}, indent=2))
    weights = {k: v for k, v in load_file(Path(target) / "model.safetensors").items() if not k.endswith(".bias")}
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    return str(out)
