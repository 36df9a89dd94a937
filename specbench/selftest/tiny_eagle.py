"""An EAGLE-3 head for the selftest's tiny target, built from the target's own weights (no fitting, no hub), whose
drafts depend on the target features as a real head's do.

The head reads one target feature per position, hidden_states[0] (the embedding of token p), and at query
position p computes the target's position p + 1: its first layer is the target's layer 0 taken apart over the
head's two input streams. Self-attending heads copy the embedding of token p + 1 into the residual and replay the
target's self and content heads over the embedding stream (keys at head position q hold token q + 1, so relative
positions match the target's); the target's previous-token head, though, reads mostly the feature: a
self-attending head whose value is the target's value of the feature row. Its second layer is the target's layer 1.
So the catch-up row drafts as the target does when it is handed the feature of the right position, and a feature
row of another position (or request) hands it another token as the previous one, which costs about half its
acceptance. Draft steps 1, 2, ... are fed the head's own hidden instead (as in EAGLE-3), a worse stand-in, so later
positions accept less, as with a real head.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from specbench.selftest.tiny import (
    CONST_DIM,
    CONST_VALUE,
    QK_GAIN,
    TinyShape,
    positional_key_bias,
    positional_query_bias,
    target_shape,
)
from specbench.speculation.drafters.eagle.config import EAGLE3_SPECULATORS
from specbench.speculation.drafters.eagle.writer import HeadFormat, HeadLayout, write_eagle_head

FEATURE_LAYERS = (0,)  # HF hidden_states indices the head reads: the target's input embeddings
# After the embedding copies (hidden / head_dim heads: 4 for the 16-wide variants, 2 for the 32-wide one), the head's
# layer 0 has the target's layer-0 heads 0, 1, 3 over embeddings, then its head 2 split over the feature and both.
NUM_REPLAYED_HEADS = 5
# Share of the target's previous-token head read from the feature (the rest over the embedding stream). Draft steps
# 1, 2, ... are fed the head's own hidden instead of a feature, so this share is lost there: 0.6 keeps acceptance
# ~0.7-0.9 / 0.3-0.5 / 0.1-0.3 at k = 3 while a wrong feature row halves it (at each position).
FEATURE_SHARE = 0.6
SHARP = 4.0  # score gain of the head's own self-attending heads: all their weight on the query's own key
HIDDEN_NORM = 1e-3  # hidden_norm weight: the normed feature joins the residual (norm_before_residual) ~1e-3 small


def num_head_heads(hidden: int, shape: TinyShape) -> int:
    """The head's attention heads per layer: the embedding copies, then the replayed target heads."""
    return hidden // shape.head_dim + NUM_REPLAYED_HEADS


def _layer0(t: dict[str, torch.Tensor], hidden: int, shape: TinyShape) -> dict[str, torch.Tensor]:
    """The head's first layer over [input_layernorm(embedding of token p + 1), hidden_norm(feature p)]."""
    d, src = shape.head_dim, "model.layers.0."
    num_copies, num_heads = hidden // d, num_head_heads(hidden, shape)
    q_w, k_w, v_w = (torch.zeros(num_heads * d, 2 * hidden) for _ in range(3))
    q_b, k_b, v_b = (torch.zeros(num_heads * d) for _ in range(3))
    o_w = torch.zeros(hidden, num_heads * d)
    tq_w, tq_b = t[src + "self_attn.q_proj.weight"], t[src + "self_attn.q_proj.bias"]
    tk_w, tk_b = t[src + "self_attn.k_proj.weight"], t[src + "self_attn.k_proj.bias"]
    tv_w, tv_b = t[src + "self_attn.v_proj.weight"], t[src + "self_attn.v_proj.bias"]
    to_w = t[src + "self_attn.o_proj.weight"]

    def rows(h: int) -> slice:
        return slice(h * d, (h + 1) * d)

    group = shape.num_heads // shape.num_kv_heads
    for h in range(num_copies):  # copy embedding dims [h * d, (h + 1) * d) into the residual
        q_b[rows(h)], k_b[rows(h)] = positional_query_bias(d, 1.0, SHARP), positional_key_bias(d)
        v_w[rows(h), rows(h)] = torch.eye(d)
        o_w[rows(h), rows(h)] = torch.eye(d)
    feature_head, stream_head = num_copies + 3, num_copies + 4  # the two halves of the target's head 2
    for h, target_head in ((num_copies, 0), (num_copies + 1, 1), (num_copies + 2, 3)):  # self and content heads
        kv = target_head // group
        q_w[rows(h), :hidden], q_b[rows(h)] = tq_w[rows(target_head)], tq_b[rows(target_head)]
        k_w[rows(h), :hidden], k_b[rows(h)] = tk_w[rows(kv)], tk_b[rows(kv)]
        v_w[rows(h), :hidden], v_b[rows(h)] = tv_w[rows(kv)], tv_b[rows(kv)]
        o_w[:, rows(h)] = to_w[:, rows(target_head)]
    # The target's previous-token head 2, split: the feature head attends to itself and takes the target's value of
    # the feature row (the previous token's embedding); the stream head is the target's head over the embeddings.
    kv = 2 // group
    q_b[rows(feature_head)], k_b[rows(feature_head)] = positional_query_bias(d, 1.0, SHARP), positional_key_bias(d)
    v_w[rows(feature_head), hidden:], v_b[rows(feature_head)] = tv_w[rows(kv)] / HIDDEN_NORM, tv_b[rows(kv)]
    o_w[:, rows(feature_head)] = FEATURE_SHARE * to_w[:, rows(2)]
    q_w[rows(stream_head), :hidden], q_b[rows(stream_head)] = tq_w[rows(2)], tq_b[rows(2)]
    k_w[rows(stream_head), :hidden], k_b[rows(stream_head)] = tk_w[rows(kv)], tk_b[rows(kv)]
    v_w[rows(stream_head), :hidden], v_b[rows(stream_head)] = tv_w[rows(kv)], tv_b[rows(kv)]
    o_w[:, rows(stream_head)] = (1 - FEATURE_SHARE) * to_w[:, rows(2)]
    return {
        "self_attn.q_proj.weight": q_w, "self_attn.q_proj.bias": q_b, "self_attn.k_proj.weight": k_w,
        "self_attn.k_proj.bias": k_b, "self_attn.v_proj.weight": v_w, "self_attn.v_proj.bias": v_b,
        "self_attn.o_proj.weight": o_w, "self_attn.o_proj.bias": t[src + "self_attn.o_proj.bias"].clone(),
        "hidden_norm.weight": torch.full((hidden,), HIDDEN_NORM),
        "input_layernorm.weight": t[src + "input_layernorm.weight"].clone(),
        **{k: t[src + k].clone() for k in ("post_attention_layernorm.weight", "mlp.gate_proj.weight",
                                          "mlp.up_proj.weight", "mlp.down_proj.weight")},
    }


def _layer1(t: dict[str, torch.Tensor], hidden: int, shape: TinyShape) -> dict[str, torch.Tensor]:
    """The target's layer 1 in the head's layout: its heads first (one kv head each), the others silent."""
    d, src = shape.head_dim, "model.layers.1."
    group = shape.num_heads // shape.num_kv_heads
    kv_rows = torch.cat([torch.arange(h // group * d, (h // group + 1) * d) for h in range(shape.num_heads)])
    pad = (num_head_heads(hidden, shape) - shape.num_heads) * d
    out = {k: t[src + k].clone() for k in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                                            "self_attn.o_proj.bias")}
    out["self_attn.q_proj.weight"] = torch.cat([t[src + "self_attn.q_proj.weight"], torch.zeros(pad, hidden)])
    out["self_attn.q_proj.bias"] = torch.cat([t[src + "self_attn.q_proj.bias"], torch.zeros(pad)])
    for proj in ("k_proj", "v_proj"):
        weight = t[f"{src}self_attn.{proj}.weight"][kv_rows]
        out[f"self_attn.{proj}.weight"] = torch.cat([weight, torch.zeros(pad, hidden)])
        out[f"self_attn.{proj}.bias"] = torch.cat([t[f"{src}self_attn.{proj}.bias"][kv_rows], torch.zeros(pad)])
    out["self_attn.o_proj.weight"] = torch.cat([t[src + "self_attn.o_proj.weight"], torch.zeros(hidden, pad)], 1)
    return out


def _fold_biases(layer: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A no-bias target's head (tiny.py's no-bias variants): q/k/v biases become the weight column of the constant
    embedding coordinate, which the embedding half of layer 0's input holds exactly (its input norm is all ones)."""
    out = {k: v for k, v in layer.items() if not k.endswith(".bias")}
    for proj in ("q_proj", "k_proj", "v_proj"):
        weight = out[f"self_attn.{proj}.weight"].clone()
        weight[:, CONST_DIM] += layer[f"self_attn.{proj}.bias"] / CONST_VALUE
        out[f"self_attn.{proj}.weight"] = weight
    return out


def _sharpen_content_queries(layer0: dict[str, torch.Tensor], layer1: dict[str, torch.Tensor], scale: float,
                             hidden: int, shape: TinyShape) -> None:
    """The head has no q/k norm: its copies of the target's content heads (target heads 1 and 3; the other two are
    positional, whose normed vectors equal their biases) get the scale the target's q norm gives a query of
    typical RMS (QK_GAIN over a unit-RMS input)."""
    d, num_copies = shape.head_dim, hidden // shape.head_dim
    for layer, heads in ((layer0, (num_copies + 1, num_copies + 2)), (layer1, (1, 3))):
        weight = layer["self_attn.q_proj.weight"].clone()
        for h in heads:
            weight[h * d:(h + 1) * d] *= scale / QK_GAIN
        layer["self_attn.q_proj.weight"] = weight


def eagle3_tensors(target_dir: str | Path) -> dict[str, torch.Tensor]:
    """Canonical-name tensors (`fc.weight`, `layers.{i}.*`, `norm.weight`); the target's embedding and lm_head are
    shared, not shipped."""
    t = load_file(Path(target_dir) / "model.safetensors")
    hidden, shape = t["model.embed_tokens.weight"].shape[1], target_shape(target_dir)
    has_bias = "model.layers.0.self_attn.q_proj.bias" in t
    if not has_bias:  # build as for a biased target with zero biases (the target's are folded into its weights)
        t = {**t, **{k.replace(".weight", ".bias"): torch.zeros(v.shape[0]) for k, v in t.items()
                     if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"))}}
    layer0, layer1 = _layer0(t, hidden, shape), _layer1(t, hidden, shape)
    if "model.layers.0.self_attn.q_norm.weight" in t:  # Qwen3 target: its content queries come out normalized
        _sharpen_content_queries(layer0, layer1, float(t["model.layers.0.self_attn.q_norm.weight"][0]), hidden, shape)
    if not has_bias:
        layer0, layer1 = _fold_biases(layer0), {k: v for k, v in layer1.items() if not k.endswith(".bias")}
    tensors = {"fc.weight": torch.eye(hidden), "norm.weight": t["model.norm.weight"].clone()}
    for i, layer in enumerate((layer0, layer1)):
        tensors.update({f"layers.{i}.{k}": v for k, v in layer.items()})
    return tensors


def eagle3_layout(target_dir: str | Path) -> HeadLayout:
    """Two decoder layers of num_head_heads heads with the target's widths and RoPE; the speculators fields."""
    target = json.loads((Path(target_dir) / "config.json").read_text())
    keys = ("hidden_size", "intermediate_size", "head_dim", "vocab_size", "rms_norm_eps", "max_position_embeddings",
            "rope_parameters", "attention_bias", "mlp_bias", "hidden_act", "bos_token_id", "eos_token_id")
    num_heads = num_head_heads(target["hidden_size"], target_shape(target_dir))
    layer = {**{k: target[k] for k in keys}, "num_hidden_layers": 2, "num_attention_heads": num_heads,
             "num_key_value_heads": num_heads, "tie_word_embeddings": False}
    return HeadLayout(layer, aux_hf_indices=FEATURE_LAYERS, norm_before_residual=True)


def build_tiny_eagle_head(target_dir: str | Path, out_dir: str | Path) -> str:
    """Write the EAGLE-3 head directory (speculators dialect) for `target_dir`; return its path."""
    return str(write_eagle_head(out_dir, eagle3_tensors(target_dir), eagle3_layout(target_dir),
                                HeadFormat(EAGLE3_SPECULATORS)))
