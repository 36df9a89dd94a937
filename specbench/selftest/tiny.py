"""A tiny random Llama target with positional attention heads and a draft LM derived by perturbing it, written
as HF directories (config.json + safetensors; no hub, no tokenizer, no transformers needed).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

VOCAB_SIZE = 512
NUM_LAYERS, HIDDEN, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM = 2, 64, 4, 2, 16
ROPE_THETA = 10000.0
# Gains of N(0, (gain / sqrt(fan_in))^2) matrices. Peaky logits (lm_head) keep greedy decisions far from ties;
# attention values/outputs outweigh the MLP so the next token depends on which keys a query sees and where.
HEAD_GAIN, QK_GAIN, VO_GAIN, MLP_GAIN = 4.0, 1.0, 2.0, 0.5
# q/k bias per rotary pair of a positional head: the preferred key outscores its neighbours by ~6 logits.
POSITIONAL_BIAS = 7.0
# Relative weight noise of the draft LM: greedy acceptance ~0.6 / 0.35 / 0.2 at k = 3 (every round shape occurs,
# rejections included), while each draft-side fault costs 0.1-0.5 of acceptance at some position.
DRAFT_NOISE = 0.08


def tiny_llama_config(vocab_size: int = VOCAB_SIZE) -> dict:
    """The HF config.json of the target and of the draft LM."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": HIDDEN, "intermediate_size": 2 * HIDDEN, "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": NUM_HEADS, "num_key_value_heads": NUM_KV_HEADS, "head_dim": HEAD_DIM,
        "hidden_act": "silu", "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"}, "attention_bias": True,
        "mlp_bias": False, "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 3,
        "dtype": "float32",
    }


def _shapes(vocab_size: int) -> dict[str, tuple[int, ...]]:
    """HF parameter name -> shape."""
    q, kv = NUM_HEADS * HEAD_DIM, NUM_KV_HEADS * HEAD_DIM
    shapes = {"model.embed_tokens.weight": (vocab_size, HIDDEN), "model.norm.weight": (HIDDEN,),
              "lm_head.weight": (vocab_size, HIDDEN)}
    for i in range(NUM_LAYERS):
        layer = {"input_layernorm.weight": (HIDDEN,), "post_attention_layernorm.weight": (HIDDEN,),
                 "self_attn.q_proj.weight": (q, HIDDEN), "self_attn.q_proj.bias": (q,),
                 "self_attn.k_proj.weight": (kv, HIDDEN), "self_attn.k_proj.bias": (kv,),
                 "self_attn.v_proj.weight": (kv, HIDDEN), "self_attn.v_proj.bias": (kv,),
                 "self_attn.o_proj.weight": (HIDDEN, q), "self_attn.o_proj.bias": (HIDDEN,),
                 "mlp.gate_proj.weight": (2 * HIDDEN, HIDDEN), "mlp.up_proj.weight": (2 * HIDDEN, HIDDEN),
                 "mlp.down_proj.weight": (HIDDEN, 2 * HIDDEN)}
        shapes.update({f"model.layers.{i}.{k}": v for k, v in layer.items()})
    return shapes


def _gain(name: str) -> float:
    if name.startswith("lm_head"):
        return HEAD_GAIN
    if ".q_proj." in name or ".k_proj." in name:
        return QK_GAIN
    return VO_GAIN if (".v_proj." in name or ".o_proj." in name) else MLP_GAIN


def _random_weights(vocab_size: int, seed: int) -> dict[str, torch.Tensor]:
    """Random weights, with what an EAGLE-1 head needs to reproduce the target exactly (tiny_eagle.py):
    unit-RMS embedding rows, all-ones layer-0 input norm and final norm."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in sorted(_shapes(vocab_size).items()):
        if name in ("model.layers.0.input_layernorm.weight", "model.norm.weight"):
            weights[name] = torch.ones(shape)
        elif name.endswith(".bias"):
            weights[name] = torch.zeros(shape)
        elif name.endswith("norm.weight"):
            weights[name] = 1.0 + 0.2 * torch.randn(shape, generator=gen)
        elif name.endswith("embed_tokens.weight"):
            rows = torch.randn(shape, generator=gen)
            weights[name] = rows / rows.pow(2).mean(-1, keepdim=True).sqrt()
        else:
            weights[name] = torch.randn(shape, generator=gen) * (_gain(name) / shape[1] ** 0.5)
    return weights


def _inv_freq() -> torch.Tensor:  # [HEAD_DIM / 2] RoPE frequencies
    return ROPE_THETA ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)


def positional_key_bias() -> torch.Tensor:  # [HEAD_DIM] the k bias of every positional head (zero k weights)
    inv_freq = _inv_freq()
    return torch.cat([torch.full_like(inv_freq, POSITIONAL_BIAS), torch.zeros_like(inv_freq)])


def positional_query_bias(sign: float, gain: float = 1.0) -> torch.Tensor:  # [HEAD_DIM]
    """q bias of a positional head: sign +1 prefers the key at m + 1 (so, causally, itself), -1 the previous key;
    gain scales its scores (and so how sharply it prefers)."""
    inv_freq = _inv_freq()
    return gain * POSITIONAL_BIAS * torch.cat([inv_freq.cos(), sign * inv_freq.sin()])


def _add_positional_heads(weights: dict[str, torch.Tensor]) -> None:
    """Per layer, two query heads whose scores depend on relative position only (q/k biases, zero q/k weights).

    With RoPE, constant q and k pairs at angles a and b score cos((m - n) * theta + a - b) for query m, key n.
    Head 0 (a - b = theta) prefers the key at m + 1: in a correct engine none is visible, so it attends to
    itself, but any visible key beyond the query (a rejected draft, a stale visible length) captures it.
    Head 2 (a - b = -theta) attends to the previous token, so a key missing, overwritten or one position off
    changes the next token. The other two heads keep random content queries against these position-only keys.
    """
    key = positional_key_bias()
    for i in range(NUM_LAYERS):
        attn = f"model.layers.{i}.self_attn"
        for kv_head in range(NUM_KV_HEADS):
            rows = slice(kv_head * HEAD_DIM, (kv_head + 1) * HEAD_DIM)
            weights[f"{attn}.k_proj.weight"][rows] = 0.0
            weights[f"{attn}.k_proj.bias"][rows] = key
        for q_head, sign in ((0, 1.0), (NUM_HEADS // NUM_KV_HEADS, -1.0)):
            rows = slice(q_head * HEAD_DIM, (q_head + 1) * HEAD_DIM)
            weights[f"{attn}.q_proj.weight"][rows] = 0.0
            weights[f"{attn}.q_proj.bias"][rows] = positional_query_bias(sign)


@torch.no_grad()
def perturb_(tensors, noise: float, seed: int) -> None:
    """In place: every tensor w += noise * std(w) * N(0, 1), in the given (sorted-name) order."""
    gen = torch.Generator().manual_seed(1_000_003 + seed)  # never replays a build seed's stream
    for param in tensors:
        param.add_(noise * param.std() * torch.randn(param.shape, generator=gen))


def _write(out_dir: Path, weights: dict[str, torch.Tensor], vocab_size: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(tiny_llama_config(vocab_size), indent=2))
    save_file({k: v.contiguous() for k, v in weights.items()}, out_dir / "model.safetensors", metadata={"format": "pt"})


def build_tiny_pair(out_dir: str | Path, *, seed: int = 0, noise: float = DRAFT_NOISE,
                    vocab_size: int = VOCAB_SIZE) -> tuple[str, str]:
    """Write `target/` and `draft/` (the target's weights perturbed by `noise`) as fp32 HF directories."""
    out = Path(out_dir)
    weights = _random_weights(vocab_size, seed)
    _add_positional_heads(weights)
    _write(out / "target", weights, vocab_size)
    perturb_([weights[k] for k in sorted(weights)], noise, seed)
    _write(out / "draft", weights, vocab_size)
    return str(out / "target"), str(out / "draft")


def random_prompts(num: int, *, seed: int = 0, min_len: int = 5, max_len: int = 30,
                   vocab_size: int = VOCAB_SIZE) -> list[list[int]]:
    """Token-id prompts of varied lengths (ids >= 4 avoid the special ids)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (num,), generator=gen).tolist()
    return [torch.randint(4, vocab_size, (n,), generator=gen).tolist() for n in lengths]
