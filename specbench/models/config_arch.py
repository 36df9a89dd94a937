"""What gpt-oss and Gemma-2/3 add to a Llama-family config: attention sinks, the attention scale, logit soft-capping;
and the quantized checkpoints the engine refuses (MXFP4, as gpt-oss ships).

- gpt-oss: a learned sink logit per query head in every layer (`self_attn.sinks`); softmax scale head_dim ** -0.5.
- Gemma-2: scale query_pre_attn_scalar ** -0.5; attention scores and output logits soft-capped
  (`attn_logit_softcapping`, `final_logit_softcapping`; transformers' defaults 50 and 30 when a config omits them,
  off when it says null).
- Gemma-3: as Gemma-2 but transformers' Gemma-3 attention never applies `attn_logit_softcapping` (the field exists,
  the layer does not pass it; released configs say null), so neither do we: the engine matches the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError
from specbench.models.config_shape import HFConfigShape

GPT_OSS = "gpt_oss"
GEMMA2 = "gemma2"
GEMMA3 = "gemma3"
GEMMA_ARCHITECTURES = (GEMMA2, GEMMA3)
_GEMMA2_SOFTCAPS = {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}  # transformers' defaults
_GEMMA_ACTIVATIONS = ("gelu_pytorch_tanh",)  # GELU with the tanh approximation
_QUANTIZED_SUFFIXES = ("_blocks", "_scales")  # MXFP4 expert tensors: packed 4-bit blocks and their e8m0 scales


@dataclass(frozen=True)
class ArchFeatures:
    has_attention_sinks: bool = False
    query_pre_attn_scalar: float | None = None
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None


def arch_features(architecture: str, shape: HFConfigShape) -> ArchFeatures:
    if architecture == GPT_OSS:
        return ArchFeatures(has_attention_sinks=True)
    if architecture not in GEMMA_ARCHITECTURES:
        return ArchFeatures()
    activation = shape.hidden_activation or "gelu_pytorch_tanh"
    if activation not in _GEMMA_ACTIVATIONS:
        raise SpecbenchError(f"unsupported Gemma hidden_activation {activation!r}; supported: "
                             f"{', '.join(_GEMMA_ACTIVATIONS)}")
    if getattr(shape, "use_bidirectional_attention", None):
        raise SpecbenchError("Gemma with use_bidirectional_attention is an encoder, not a causal LM")
    scalar = shape.query_pre_attn_scalar or 256.0
    if architecture == GEMMA3:
        return ArchFeatures(query_pre_attn_scalar=scalar, final_logit_softcapping=shape.final_logit_softcapping)
    caps = {name: getattr(shape, name) if name in shape.model_fields_set else default
            for name, default in _GEMMA2_SOFTCAPS.items()}
    return ArchFeatures(query_pre_attn_scalar=scalar, **caps)


def refuse_quantized(shape: HFConfigShape) -> None:
    """MXFP4 (gpt-oss's released checkpoints) is refused in one line; the bf16 checkpoints load."""
    method = (shape.quantization_config or {}).get("quant_method")
    if method == "mxfp4":
        raise SpecbenchError("MXFP4-quantized checkpoints are not supported (quantization_config.quant_method "
                             "'mxfp4'); use a bf16 checkpoint of the model")
    if method is not None:
        raise SpecbenchError(f"quantized checkpoints are not supported (quantization_config.quant_method {method!r})")


def refuse_quantized_weight(name: str) -> None:
    """A checkpoint whose config hides its quantization still shows it in the tensor names."""
    if name.endswith(_QUANTIZED_SUFFIXES):
        raise SpecbenchError(f"MXFP4-quantized checkpoints are not supported (weight {name!r}); use a bf16 checkpoint "
                             "of the model")
