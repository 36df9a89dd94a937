"""RoPE of a Hugging Face config: base, scaling (linear, llama3, YaRN) and, for Gemma-3, the sliding layers' own base.

transformers >= 5 writes `rope_parameters` (Gemma-3: one such object per layer type, keyed "full_attention" /
"sliding_attention"); older configs `rope_theta`, `rope_scaling` and Gemma-3's `rope_local_base_freq`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specbench.errors import SpecbenchError
from specbench.models.config_shape import HFConfigShape, RopeShape

ROPE_TYPES = ("default", "linear", "llama3", "yarn")
LAYER_TYPE_KEYS = ("full_attention", "sliding_attention")
# transformers' default bases where a config names none (its `default_theta`).
_DEFAULT_THETA = {"gpt_oss": 150000.0, "gemma3_text": 1000000.0}
_GEMMA3_LOCAL_THETA = 10000.0


@dataclass(frozen=True)
class RopeScaling:
    rope_type: str  # "linear" | "llama3" | "yarn"
    factor: float
    # llama3 only: wavelengths between these bands are smoothly interpolated.
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192  # llama3 and yarn
    # yarn only: dims rotating between beta_slow and beta_fast times over the original context are interpolated.
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True  # yarn: the correction range is rounded outwards to whole dims
    attention_factor: float = 1.0  # yarn: cos and sin are multiplied by it (1.0 for the other types)


@dataclass(frozen=True)
class Rope:
    theta: float
    scaling: RopeScaling | None
    sliding_theta: float | None  # Gemma-3: sliding-window layers rotate with this base, unscaled; None: as the rest


def per_layer_type_rope(hf: dict[str, Any]) -> tuple[dict[str, Any], dict[str, RopeShape] | None]:
    """(hf without a per-layer-type `rope_parameters`, that object parsed) — Gemma-3 as transformers >= 5 saves it."""
    params = hf.get("rope_parameters")
    if not isinstance(params, dict) or not set(params) & set(LAYER_TYPE_KEYS):
        return hf, None
    unknown = sorted(set(params) - set(LAYER_TYPE_KEYS))
    if unknown:
        raise SpecbenchError(f"model config field 'rope_parameters' has unknown layer type {unknown[0]!r}; "
                             f"supported: {', '.join(LAYER_TYPE_KEYS)}")
    parsed = {k: RopeShape.model_validate(v or {}) for k, v in params.items()}
    return {k: v for k, v in hf.items() if k != "rope_parameters"}, parsed


def rope_from_hf(shape: HFConfigShape, per_layer: dict[str, RopeShape] | None, head_dim: int) -> Rope:
    default_theta = _DEFAULT_THETA.get(shape.model_type or "", 10000.0)
    if shape.model_type == "gemma3_text":
        return _gemma3(shape, per_layer, head_dim, default_theta)
    if per_layer is not None:
        raise SpecbenchError("per-layer-type 'rope_parameters' are only supported for Gemma-3")
    params = shape.rope_parameters or shape.rope_scaling
    if params is None and shape.model_type == "gpt_oss":
        # transformers' GptOssConfig default when the config names no RoPE.
        params = RopeShape(rope_type="yarn", factor=32.0, beta_fast=32.0, beta_slow=1.0, truncate=False,
                           original_max_position_embeddings=4096)
    theta = (params.rope_theta if params else None) or shape.rope_theta or default_theta
    return Rope(theta, _scaling(params or RopeShape(), shape), None)


def _gemma3(shape: HFConfigShape, per_layer: dict[str, RopeShape] | None, head_dim: int,
            default_theta: float) -> Rope:
    if per_layer is not None:
        full = per_layer.get("full_attention") or RopeShape()
        sliding = per_layer.get("sliding_attention") or RopeShape()
        if _scaling(sliding, shape) is not None:
            raise SpecbenchError("scaled RoPE on Gemma-3 sliding-window layers is not supported")
        return Rope(full.rope_theta or default_theta, _scaling(full, shape),
                    sliding.rope_theta or _GEMMA3_LOCAL_THETA)
    params = shape.rope_scaling or shape.rope_parameters or RopeShape()
    return Rope(shape.rope_theta or params.rope_theta or default_theta, _scaling(params, shape),
                shape.rope_local_base_freq or _GEMMA3_LOCAL_THETA)


def _scaling(params: RopeShape, shape: HFConfigShape) -> RopeScaling | None:
    rope_type = params.rope_type or params.type or "default"
    if rope_type not in ROPE_TYPES:
        raise SpecbenchError(f"unsupported rope_scaling type {rope_type!r}; supported: {', '.join(ROPE_TYPES)}")
    if rope_type == "default":
        return None
    if rope_type == "yarn":
        return _yarn(params, shape)
    if params.factor is None:
        raise SpecbenchError(f"model config is missing required field 'factor' (rope type {rope_type})")
    if rope_type == "linear":
        return RopeScaling(rope_type="linear", factor=params.factor)
    llama3 = ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    missing = [name for name in llama3 if getattr(params, name) is None]
    if missing:
        raise SpecbenchError(f"model config is missing required field {missing[0]!r} (rope type llama3)")
    return RopeScaling(
        rope_type="llama3",
        factor=params.factor,
        low_freq_factor=params.low_freq_factor,
        high_freq_factor=params.high_freq_factor,
        original_max_position_embeddings=params.original_max_position_embeddings,
    )


def _yarn(params: RopeShape, shape: HFConfigShape) -> RopeScaling:
    """transformers' `_compute_yarn_parameters` defaults: factor from the context ratio, attention factor from
    mscale (0.1 ln(factor) + 1), betas 32 / 1, truncate on."""
    original = params.original_max_position_embeddings
    if original is None:
        raise SpecbenchError("model config is missing required field 'original_max_position_embeddings' "
                             "(rope type yarn)")
    factor = params.factor or shape.max_position_embeddings / original
    attention_factor = params.attention_factor
    if attention_factor is None:
        if params.mscale and params.mscale_all_dim:
            attention_factor = _mscale(factor, params.mscale) / _mscale(factor, params.mscale_all_dim)
        else:
            attention_factor = _mscale(factor, 1.0)
    return RopeScaling(rope_type="yarn", factor=factor, original_max_position_embeddings=original,
                       beta_fast=params.beta_fast or 32.0, beta_slow=params.beta_slow or 1.0,
                       truncate=params.truncate is not False, attention_factor=float(attention_factor))


def _mscale(scale: float, mscale: float) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
