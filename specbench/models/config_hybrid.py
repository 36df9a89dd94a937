"""What a hybrid architecture adds to a model config: the per-layer kinds, the recurrent layers' shape, the partial
RoPE width; and what the engine refuses. Qwen3-Next: Gated DeltaNet layers beside gated full attention
(`layer_types`); Bamba: Mamba-2 mixers beside plain full attention (`attn_layer_indices`); Nemotron-H: Mamba-2
mixers, attention without RoPE and relu^2 MLPs, one per block (`hybrid_override_pattern`, config_nemotron_h.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.attention.kinds import AttentionKind, FullAttention
from specbench.attention.recurrent_kind import GatedDeltaNetKind, Mamba2Kind
from specbench.errors import SpecbenchError
from specbench.models.config_shape import HFConfigShape, RopeShape
from specbench.recurrent.config import GatedDeltaNetConfig, gated_delta_net_from_hf
from specbench.models.config_nemotron_h import ATTENTION, block_pattern, group_blocks, nemotron_h_mamba2
from specbench.recurrent.mamba2_config import Mamba2Config, mamba2_from_hf

QWEN3_NEXT = "qwen3_next"  # Qwen3-Next and Qwen3.5 / 3.6 (their blocks, with split DeltaNet projections)
# Qwen3.5's text models (the Qwen3-Next blocks; GatedDeltaNetConfig.is_split_projections): model_type -> architecture
QWEN3_5_TEXT_MODELS = {"qwen3_5_text": "Qwen3_5ForCausalLM", "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM"}
# no expert fields at all, unlike a dense Qwen3-Next config (num_experts 0)
QWEN3_5_DENSE = QWEN3_5_TEXT_MODELS["qwen3_5_text"]
BAMBA = "bamba"
GRANITE_HYBRID = "granitemoehybrid"
_GRANITE_LAYER_TYPES = {"mamba": "mamba2", "linear_attention": "mamba2", "attention": "full", "full_attention": "full"}


@dataclass(frozen=True)
class HybridFields:
    kinds: tuple[AttentionKind, ...] = ()
    gated_delta_net: GatedDeltaNetConfig | None = None
    partial_rotary_dim: int | None = None
    mamba2: Mamba2Config | None = None
    nemotron_blocks: tuple[str, ...] = ()


def bamba_from_hf(hf: dict, shape: HFConfigShape) -> HybridFields:
    """Bamba: layers in `attn_layer_indices` full attention, the others Mamba-2 (RoPE: config.py's rotary_dim)."""
    indices = hf.get("attn_layer_indices") or []
    if not isinstance(indices, list) or not all(isinstance(i, int) and 0 <= i < shape.num_hidden_layers
                                                for i in indices):
        raise SpecbenchError(f"model config field 'attn_layer_indices' must list layer indices in "
                             f"[0, {shape.num_hidden_layers}), got {indices!r}")
    kinds = tuple(FullAttention() if i in indices else Mamba2Kind() for i in range(shape.num_hidden_layers))
    return HybridFields(kinds, mamba2=mamba2_from_hf(hf, shape.hidden_size))


def granite_hybrid_from_hf(hf: dict, shape: HFConfigShape) -> HybridFields:
    """Granite-4: `layer_types` (mamba / attention, or transformers 5's linear_attention / full_attention) name each
    layer's mixer; the Mamba-2 fields are Bamba's `mamba_*` ones."""
    types = hf.get("layer_types") or hf.get("layers_block_type")
    if (not isinstance(types, list) or len(types) != shape.num_hidden_layers
            or not all(t in _GRANITE_LAYER_TYPES for t in types)):
        raise SpecbenchError(f"model config field 'layer_types' must list {shape.num_hidden_layers} layer types among "
                             f"{sorted(_GRANITE_LAYER_TYPES)}, got {types!r}")
    kinds = tuple(Mamba2Kind() if _GRANITE_LAYER_TYPES[t] == "mamba2" else FullAttention() for t in types)
    return HybridFields(kinds, mamba2=mamba2_from_hf(hf, shape.hidden_size))


def nemotron_h_from_hf(hf: dict) -> HybridFields:
    """Nemotron-H: one engine layer per mixer block, full attention ('*') or Mamba-2 ('M'), each with the MLP blocks
    after it (config_nemotron_h.py)."""
    groups = group_blocks(block_pattern(hf))
    kinds = tuple(FullAttention() if ATTENTION in g else Mamba2Kind() for g in groups)
    return HybridFields(kinds, mamba2=nemotron_h_mamba2(hf), nemotron_blocks=groups)


def hybrid_from_hf(architecture: str, hf: dict, shape: HFConfigShape, head_dim: int) -> HybridFields:
    layer_types = shape.layer_types
    if not layer_types:
        interval = hf.get("full_attention_interval", 4)  # transformers' default pattern
        layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                       for i in range(shape.num_hidden_layers)]
    if len(layer_types) != shape.num_hidden_layers:
        raise SpecbenchError(f"model config field 'layer_types' lists {len(layer_types)} layers, "
                             f"the model has {shape.num_hidden_layers}")
    bad = sorted(set(layer_types) - {"full_attention", "linear_attention"})
    if bad:
        raise SpecbenchError(f"unsupported {architecture} layer type {bad[0]!r}; supported: full_attention, "
                             "linear_attention")
    kinds = tuple(GatedDeltaNetKind() if t == "linear_attention" else FullAttention() for t in layer_types)
    params = shape.rope_parameters or shape.rope_scaling or RopeShape()
    factor = params.partial_rotary_factor or shape.partial_rotary_factor or 1.0
    rotary = int(head_dim * factor)
    if rotary % 2 or not 0 < rotary <= head_dim:
        raise SpecbenchError(f"partial_rotary_factor {factor} gives {rotary} rotated dims of head_dim {head_dim}; "
                             "they must be even and in (0, head_dim]")
    return HybridFields(kinds, gated_delta_net_from_hf(hf, qwen3_5_architecture(hf) is not None), rotary)


def qwen3_5_architecture(hf: dict) -> str | None:
    """The Qwen3.5 / 3.6 text architecture a config names (by its architectures, else its model_type), or None."""
    names = hf.get("architectures") or []
    if names:
        return next((n for n in names if n in QWEN3_5_TEXT_MODELS.values()), None)
    return QWEN3_5_TEXT_MODELS.get(hf.get("model_type"))
