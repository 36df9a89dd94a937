"""Write a random-weight EAGLE-3 head shaped for a target (native dialect), for performance work at real shapes.

Its drafts are meaningless, so it is run with --synthetic-acceptance; what it measures is the cost of drafting.
"""

from __future__ import annotations

from pathlib import Path

import torch

from specbench.models.config import ModelConfig
from specbench.speculation.drafters.eagle.config import EAGLE3_NATIVE
from specbench.speculation.drafters.eagle.writer import HeadFormat, HeadLayout, write_eagle_head


def dummy_eagle3_tensors(target: ModelConfig, draft_vocab_size: int, aux_hf_indices: tuple[int, ...],
                         seed: int = 0) -> dict[str, torch.Tensor]:
    """Canonical EAGLE-3 names -> bf16 N(0, 0.02) tensors (norms 1), with a d2t/t2d vocabulary map."""
    h, inter, vocab = target.hidden_size, target.intermediate_size, target.vocab_size
    q_size, kv_size = target.num_attention_heads * target.head_dim, target.num_key_value_heads * target.head_dim
    gen = torch.Generator().manual_seed(seed)
    shapes = {
        "fc.weight": (h, len(aux_hf_indices) * h),
        "layers.0.self_attn.q_proj.weight": (q_size, 2 * h),
        "layers.0.self_attn.k_proj.weight": (kv_size, 2 * h),
        "layers.0.self_attn.v_proj.weight": (kv_size, 2 * h),
        "layers.0.self_attn.o_proj.weight": (h, q_size),
        "layers.0.mlp.gate_proj.weight": (inter, h),
        "layers.0.mlp.up_proj.weight": (inter, h),
        "layers.0.mlp.down_proj.weight": (h, inter),
        "lm_head.weight": (draft_vocab_size, h),
    }
    tensors = {name: (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16) for name, shape in shapes.items()}
    for norm in ("layers.0.hidden_norm.weight", "layers.0.input_layernorm.weight",
                 "layers.0.post_attention_layernorm.weight", "norm.weight"):
        tensors[norm] = torch.ones(h, dtype=torch.bfloat16)
    # Draft ids map to an evenly spread subset of the target vocabulary (real heads keep the most frequent ids).
    stride = max(1, vocab // draft_vocab_size)
    target_ids = torch.arange(draft_vocab_size, dtype=torch.int64) * stride
    tensors["d2t"] = target_ids - torch.arange(draft_vocab_size)  # offsets: target id = draft id + d2t[draft id]
    tensors["t2d"] = torch.zeros(vocab, dtype=torch.bool).index_fill_(0, target_ids, True)
    return tensors


def write_dummy_eagle3_head(target: ModelConfig, out_dir: str | Path, *, draft_vocab_size: int = 32000,
                            seed: int = 0) -> Path:
    """A loadable `--method eagle3 --draft DIR` head (native dialect): one layer, the target's widths, aux layers
    low/mid/high."""
    if draft_vocab_size > target.vocab_size:
        draft_vocab_size = target.vocab_size
    n = target.num_hidden_layers
    # The layer-output ids EAGLE-3 heads ship for Llama-3.1-8B (2, 16, 29); shallow test targets keep what fits.
    aux = (2, n // 2, n - 3) if n >= 6 else tuple(sorted({0, n // 2, n - 1}))
    aux_hf_indices = tuple(i + 1 for i in aux)
    layer = {
        "hidden_size": target.hidden_size, "intermediate_size": target.intermediate_size,
        "num_attention_heads": target.num_attention_heads, "num_key_value_heads": target.num_key_value_heads,
        "head_dim": target.head_dim, "num_hidden_layers": 1, "hidden_act": "silu", "vocab_size": target.vocab_size,
        "rms_norm_eps": target.rms_norm_eps, "rope_theta": target.rope_theta,
        "max_position_embeddings": target.max_position_embeddings, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    tensors = dummy_eagle3_tensors(target, draft_vocab_size, aux_hf_indices, seed)
    layout = HeadLayout(layer, aux_hf_indices=aux_hf_indices, draft_vocab_size=draft_vocab_size)
    return write_eagle_head(out_dir, tensors, layout, HeadFormat(EAGLE3_NATIVE, aux_field="nested"))
