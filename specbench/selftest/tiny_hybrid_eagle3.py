"""An EAGLE-3 head for the selftest's hybrid target (tiny_hybrid.py), built from the target's own weights (no fitting),
so that its drafts are accepted often: rollbacks of every accepted length then occur on its rows.

The hybrid target's next token is mostly the current token's embedding through its last attention layer's MLP, the
final norm and the lm_head (its mixers are small: tiny_hybrid.LAYER_GAIN); its own MTP module drafts well by copying
that layer (tiny_mtp.py). An EAGLE-3 layer reaches the next token's embedding through its attention only (the residual
stream is the fc over the target's features), so here:
- attention: one head per KV head (no grouping), q = k = SHARP x a head's slice of input_layernorm(embedding of token
  p + 1): every query attends to its own position (RoPE leaves a relative distance of zero unrotated); v = that
  slice, o_proj puts the slices back: the normed embedding joins the residual;
- fc: a small random map of the target's features (FEATURE_GAIN): the drafts depend on them, so a wrong feature row
  moves the draft logits the oracle checks, without costing much acceptance;
- the MLP, its norm, the final norm and the lm_head are the target's (the (1 + w) norms written as 1 + w).
Aux layers: the target's low / mid / high hidden states (HF indices 1, 2, 4 of its 4 layers).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from specbench.speculation.drafters.eagle.config import EAGLE3_NATIVE
from specbench.speculation.drafters.eagle.writer import HeadFormat, HeadLayout, write_eagle_head

AUX_HF_INDICES = (1, 2, 4)
SHARP = 2.5  # q = k gain: a self score of SHARP^2 * head_dim / sqrt(head_dim) ~ 25 against ~SHARP^2 for others
FEATURE_GAIN = 0.04  # fc weight scale (per unit RMS feature), as the MTP module's hidden term


def build_hybrid_eagle3_head(target: str, out_dir: str, seed: int) -> str:
    """Write the head for the hybrid target directory `target` to `out_dir` (native EAGLE-3 dialect); its path."""
    hf = json.loads((Path(target) / "config.json").read_text())
    t = load_file(Path(target) / "model.safetensors")
    h, d, eps = hf["hidden_size"], hf["head_dim"], hf["rms_norm_eps"]
    heads = h // d
    attention = hf["layer_types"].index("full_attention", len(hf["layer_types"]) // 2)  # the last attention layer
    src = f"model.layers.{attention}."
    gen = torch.Generator().manual_seed(9_000_011 + seed)  # never replays another builder's stream
    pick = torch.cat([torch.eye(h), torch.zeros(h, h)], dim=1)  # [H, 2H]: the embedding half of the layer input
    one = torch.ones(h)
    tensors = {
        "fc.weight": torch.randn(h, len(AUX_HF_INDICES) * h, generator=gen) * (FEATURE_GAIN / h ** 0.5),
        "layers.0.self_attn.q_proj.weight": SHARP * pick,
        "layers.0.self_attn.k_proj.weight": SHARP * pick,
        "layers.0.self_attn.v_proj.weight": pick.clone(),
        "layers.0.self_attn.o_proj.weight": torch.eye(h),
        "layers.0.mlp.gate_proj.weight": t[src + "mlp.gate_proj.weight"],
        "layers.0.mlp.up_proj.weight": t[src + "mlp.up_proj.weight"],
        "layers.0.mlp.down_proj.weight": t[src + "mlp.down_proj.weight"],
        "layers.0.hidden_norm.weight": one.clone(),
        "layers.0.input_layernorm.weight": one.clone(),
        "layers.0.post_attention_layernorm.weight": 1.0 + t[src + "post_attention_layernorm.weight"],
        "norm.weight": 1.0 + t["model.norm.weight"],
        "lm_head.weight": t["lm_head.weight"],
        "d2t": torch.zeros(hf["vocab_size"], dtype=torch.int64),  # the target's vocabulary, unmapped
        "t2d": torch.ones(hf["vocab_size"], dtype=torch.bool),
    }
    layer = {
        "hidden_size": h, "intermediate_size": hf["intermediate_size"], "num_attention_heads": heads,
        "num_key_value_heads": heads, "head_dim": d, "num_hidden_layers": 1, "hidden_act": "silu",
        "vocab_size": hf["vocab_size"], "rms_norm_eps": eps, "rope_theta": 10000.0,
        "max_position_embeddings": hf["max_position_embeddings"], "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    layout = HeadLayout(layer, aux_hf_indices=AUX_HF_INDICES, draft_vocab_size=hf["vocab_size"])
    return str(write_eagle_head(out_dir, {k: v.contiguous() for k, v in tensors.items()}, layout,
                                HeadFormat(EAGLE3_NATIVE)))
