"""A tiny random Llama target with positional attention heads and a draft LM derived by perturbing it, written
as HF directories (config.json + safetensors; no hub, no tokenizer, no transformers needed).

Variants (VARIANTS) reach the layer paths a real model family takes (execution_paths.py):
- "biased": Llama with q/k/v/o biases, untied. The positional heads are q/k biases; no fused projection takes a
  biased layer, so every forward runs the eager layers.
- "llama": no biases, tied embeddings; on CUDA its forwards up to the gemv's 64 tokens take the fused projections with
  the RoPE/K-V-store epilogue (proj.rope_store). Its heads are 32 wide (the others' 16) because the epilogue's
  tensor-core tiles need 16 dims per half head past one token (kernels/gemv_rope.py: rope_store_fits): prefills,
  decode and verify batches take it, not only one-token steps. Its attention is 128 wide over the 64-wide stream
  (o_proj maps it back, as in Qwen3 or Gemma); the other variants keep 16-wide heads, so their pairs are unchanged.
- "qwen3": no biases, Qwen3 q/k norm, untied; the fused projections without the epilogue (proj.fused; the EAGLE-3
  head built from a no-bias target takes it too, tiny_eagle.py).
Without biases the positional heads keep their biases as a weight column: every embedding row holds the constant
CONST_VALUE at CONST_DIM and is unit-RMS, so layer 0's input norm (all ones) hands every token exactly that value
there, and a q/k weight column of bias / CONST_VALUE is the bias. No projection writes CONST_DIM (zero o_proj and
down_proj rows), so the residual stream keeps the constant; layer 1's norm divides it by the stream's RMS, which
scales its positional heads' scores per token (~0.3-1x) without moving the key they prefer. With Qwen3's q/k norm
the head vectors are normalized first, so q_norm / k_norm weights of the biases' RMS restore them exactly in every
layer (content heads then score ~25x more sharply; they stay random content queries).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

VOCAB_SIZE = 512
NUM_LAYERS, HIDDEN, NUM_HEADS, NUM_KV_HEADS = 2, 64, 4, 2
ROPE_THETA = 10000.0
# Gains of N(0, (gain / sqrt(fan_in))^2) matrices. Peaky logits (lm_head) keep greedy decisions far from ties;
# attention values/outputs outweigh the MLP so the next token depends on which keys a query sees and where.
HEAD_GAIN, QK_GAIN, VO_GAIN, MLP_GAIN = 4.0, 1.0, 2.0, 0.5
# q/k bias per rotary pair of a positional head: the preferred key outscores its neighbours by ~6 logits.
POSITIONAL_BIAS = 7.0
# Relative weight noise of the draft LM per variant: greedy acceptance ~0.6 / 0.35 / 0.2 at k = 3 on the biased pair
# (every round shape occurs, rejections included), while each draft-side fault costs 0.1-0.5 of acceptance at some
# position. The tied variant's 32-wide heads lose more to the same noise: 0.06 keeps its acceptance where 0.08 left
# it with 16-wide heads (~0.4 / 0.2 / 0.08 over its seeds; 0.3 / 0.12 / 0.05 at 0.08).
DRAFT_NOISES = {"biased": 0.08, "llama": 0.06, "qwen3": 0.08}
VARIANTS = ("biased", "llama", "qwen3")
CONST_DIM, CONST_VALUE = 0, 2.0  # the embedding coordinate that stands in for a bias input (no-bias variants)
# Head width per variant. The positional heads' margins do not move with it: a pair scores POSITIONAL_BIAS^2 *
# cos(angle) / sqrt(head_dim), and the added pairs rotate slowly, so the preferred key still leads its neighbours
# by ~6 logits (5.9 at 32 against 6.3 at 16), and content queries against the positional keys keep their spread.
HEAD_DIMS = {"biased": 16, "llama": 32, "qwen3": 16}


@dataclass(frozen=True)
class TinyShape:
    """The attention shape of a tiny target (the same for its draft LM and the heads built from it)."""

    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim


def variant_shape(variant: str) -> TinyShape:
    _check_variant(variant)
    return TinyShape(NUM_HEADS, NUM_KV_HEADS, HEAD_DIMS[variant])


def target_shape(model_dir: str | Path) -> TinyShape:
    """The attention shape a tiny model directory (target, draft LM or n-gram copy) was written with."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return TinyShape(config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"])


def variant_for_seed(seed: int) -> str:
    """The selftest's variant of a seed: seed 0 (the mutation table's) stays the tuned biased pair."""
    return VARIANTS[seed % len(VARIANTS)]


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        from specbench.errors import SpecbenchError

        raise SpecbenchError(f"unknown tiny-model variant {variant!r}; supported: {', '.join(VARIANTS)}")


def tiny_llama_config(vocab_size: int = VOCAB_SIZE, variant: str = "biased") -> dict:
    """The HF config.json of the target and of the draft LM."""
    shape = variant_shape(variant)
    is_qwen3 = variant == "qwen3"
    return {
        "architectures": ["Qwen3ForCausalLM" if is_qwen3 else "LlamaForCausalLM"],
        "model_type": "qwen3" if is_qwen3 else "llama", "vocab_size": vocab_size,
        "hidden_size": HIDDEN, "intermediate_size": 2 * HIDDEN, "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": shape.num_heads, "num_key_value_heads": shape.num_kv_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu", "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"}, "attention_bias": variant == "biased",
        "mlp_bias": False, "tie_word_embeddings": variant == "llama", "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 3,
        "dtype": "float32",
    }


def _shapes(vocab_size: int, shape: TinyShape) -> dict[str, tuple[int, ...]]:
    """HF parameter name -> shape."""
    q, kv = shape.q_size, shape.kv_size
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


def _random_weights(vocab_size: int, seed: int, attn: TinyShape) -> dict[str, torch.Tensor]:
    """Random weights, with what an EAGLE-1 head needs to reproduce the target exactly (tiny_eagle.py):
    unit-RMS embedding rows, all-ones layer-0 input norm and final norm."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, shape in sorted(_shapes(vocab_size, attn).items()):
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


def _inv_freq(head_dim: int) -> torch.Tensor:  # [head_dim / 2] RoPE frequencies
    return ROPE_THETA ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)


def positional_key_bias(head_dim: int) -> torch.Tensor:  # [head_dim] the k bias of every positional head (zero k weights)
    inv_freq = _inv_freq(head_dim)
    return torch.cat([torch.full_like(inv_freq, POSITIONAL_BIAS), torch.zeros_like(inv_freq)])


def positional_query_bias(head_dim: int, sign: float, gain: float = 1.0) -> torch.Tensor:  # [head_dim]
    """q bias of a positional head: sign +1 prefers the key at m + 1 (so, causally, itself), -1 the previous key;
    gain scales its scores (and so how sharply it prefers)."""
    inv_freq = _inv_freq(head_dim)
    return gain * POSITIONAL_BIAS * torch.cat([inv_freq.cos(), sign * inv_freq.sin()])


def _add_positional_heads(weights: dict[str, torch.Tensor], shape: TinyShape) -> None:
    """Per layer, two query heads whose scores depend on relative position only (q/k biases, zero q/k weights).

    With RoPE, constant q and k pairs at angles a and b score cos((m - n) * theta + a - b) for query m, key n.
    Head 0 (a - b = theta) prefers the key at m + 1: in a correct engine none is visible, so it attends to
    itself, but any visible key beyond the query (a rejected draft, a stale visible length) captures it.
    Head 2 (a - b = -theta) attends to the previous token, so a key missing, overwritten or one position off
    changes the next token. The other two heads keep random content queries against these position-only keys.
    """
    d = shape.head_dim
    key = positional_key_bias(d)
    for i in range(NUM_LAYERS):
        attn = f"model.layers.{i}.self_attn"
        for kv_head in range(shape.num_kv_heads):
            rows = slice(kv_head * d, (kv_head + 1) * d)
            weights[f"{attn}.k_proj.weight"][rows] = 0.0
            weights[f"{attn}.k_proj.bias"][rows] = key
        for q_head, sign in ((0, 1.0), (shape.num_heads // shape.num_kv_heads, -1.0)):
            rows = slice(q_head * d, (q_head + 1) * d)
            weights[f"{attn}.q_proj.weight"][rows] = 0.0
            weights[f"{attn}.q_proj.bias"][rows] = positional_query_bias(d, sign)


@torch.no_grad()
def perturb_(tensors, noise: float, seed: int) -> None:
    """In place: every tensor w += noise * std(w) * N(0, 1), in the given (sorted-name) order."""
    gen = torch.Generator().manual_seed(1_000_003 + seed)  # never replays a build seed's stream
    for param in tensors:
        param.add_(noise * param.std() * torch.randn(param.shape, generator=gen))


def _without_biases(weights: dict[str, torch.Tensor], variant: str) -> dict[str, torch.Tensor]:
    """The biased weights as a no-bias variant whose q/k/v biases ride on the constant embedding coordinate."""
    out = {k: v.clone() for k, v in weights.items() if not k.endswith(".bias")}
    embed = out["model.embed_tokens.weight"]
    rest = torch.cat([embed[:, :CONST_DIM], embed[:, CONST_DIM + 1:]], dim=1)
    # unit RMS with the constant in place: the other coordinates carry HIDDEN - CONST_VALUE^2 of the square sum
    rest = rest * ((HIDDEN - CONST_VALUE**2) / rest.pow(2).sum(-1, keepdim=True)).sqrt()
    const = torch.full((embed.shape[0], 1), CONST_VALUE)
    out["model.embed_tokens.weight"] = torch.cat([rest[:, :CONST_DIM], const, rest[:, CONST_DIM:]], dim=1)
    for i in range(NUM_LAYERS):
        prefix = f"model.layers.{i}."
        out[prefix + "input_layernorm.weight"][CONST_DIM] = 1.0  # layer 1 reads CONST_VALUE / RMS(stream) there
        for proj in ("q_proj", "k_proj", "v_proj"):
            out[f"{prefix}self_attn.{proj}.weight"][:, CONST_DIM] = weights[f"{prefix}self_attn.{proj}.bias"] / CONST_VALUE
        for writer in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            out[prefix + writer][CONST_DIM] = 0.0  # the stream keeps the constant
        if variant == "qwen3":
            head_dim = variant_shape(variant).head_dim
            scale = positional_query_bias(head_dim, 1.0).pow(2).mean().sqrt()  # = the key bias's RMS too
            out[prefix + "self_attn.q_norm.weight"] = torch.full((head_dim,), float(scale))
            out[prefix + "self_attn.k_norm.weight"] = torch.full((head_dim,), float(scale))
    if variant == "llama":
        del out["lm_head.weight"]  # tied: the embedding is the head
        # Tied, the stream's own token embedding would dominate its logits (the model repeats its input); a final
        # norm of alternating signs cancels that self-score in expectation.
        out["model.norm.weight"] = torch.tensor([(-1.0) ** i for i in range(HIDDEN)])
    return out


def _write(out_dir: Path, weights: dict[str, torch.Tensor], vocab_size: int, variant: str = "biased") -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(tiny_llama_config(vocab_size, variant), indent=2))
    save_file({k: v.contiguous() for k, v in weights.items()}, out_dir / "model.safetensors", metadata={"format": "pt"})


def build_tiny_pair(out_dir: str | Path, *, seed: int = 0, noise: float | None = None,
                    vocab_size: int = VOCAB_SIZE, variant: str = "biased") -> tuple[str, str]:
    """Write `target/` and `draft/` (the target's weights perturbed by `noise`, by default the variant's
    DRAFT_NOISES) as fp32 HF directories."""
    shape = variant_shape(variant)
    noise = DRAFT_NOISES[variant] if noise is None else noise
    out = Path(out_dir)
    weights = _random_weights(vocab_size, seed, shape)
    _add_positional_heads(weights, shape)
    if variant != "biased":
        weights = _without_biases(weights, variant)
    _write(out / "target", weights, vocab_size, variant)
    perturb_([weights[k] for k in sorted(weights)], noise, seed)
    _write(out / "draft", weights, vocab_size, variant)
    return str(out / "target"), str(out / "draft")


def random_prompts(num: int, *, seed: int = 0, min_len: int = 5, max_len: int = 30,
                   vocab_size: int = VOCAB_SIZE) -> list[list[int]]:
    """Token-id prompts of varied lengths (ids >= 4 avoid the special ids)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (num,), generator=gen).tolist()
    return [torch.randint(4, vocab_size, (n,), generator=gen).tolist() for n in lengths]
