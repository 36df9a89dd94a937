"""The fields of a Hugging Face `config.json` we read, with their types and bounds (one declaration, pydantic).

Bounds are far above any released model (the largest have hidden size 16384, ~256k vocabularies, ~10M context) and
exist so an absurd config is refused with a message instead of a failed multi-terabyte allocation or a NaN forward:
sizes are positive and bounded, floats finite. Whether the weights fit the device is models/memory.py's check.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specbench.errors import SpecbenchError
from specbench.json_file import first_error

MAX_VOCAB_SIZE = 2**24
MAX_HIDDEN_SIZE = 2**16
MAX_INTERMEDIATE_SIZE = 2**18
MAX_NUM_LAYERS = 1024
MAX_NUM_HEADS = 1024
MAX_HEAD_DIM = 1024
MAX_POSITIONS = 2**24
MAX_NUM_EXPERTS = 4096

_Size = Annotated[int, Field(ge=1)]
_Finite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_TokenId = Annotated[int, Field(ge=0, lt=MAX_VOCAB_SIZE)]


class _Shape(BaseModel):
    # Unknown keys are other frameworks' business; known ones must have the right type and range.
    model_config = ConfigDict(extra="allow")


class RopeShape(_Shape):
    """`rope_parameters` (transformers >= 5) or the older `rope_scaling` object."""

    rope_theta: _Finite | None = None
    rope_type: str | None = None
    type: str | None = None
    factor: _Finite | None = None
    low_freq_factor: _Finite | None = None
    high_freq_factor: _Finite | None = None
    original_max_position_embeddings: Annotated[int, Field(ge=1, le=MAX_POSITIONS)] | None = None
    partial_rotary_factor: Annotated[float, Field(gt=0, le=1)] | None = None  # GLM-4.5 (transformers >= 5)
    # YaRN (gpt-oss): the band between beta_slow and beta_fast rotations is interpolated; cos/sin scaled.
    beta_fast: _Finite | None = None
    beta_slow: _Finite | None = None
    truncate: bool | None = None  # None: transformers' default, True
    attention_factor: _Finite | None = None
    mscale: _Finite | None = None
    mscale_all_dim: _Finite | None = None


class HFConfigShape(_Shape):
    model_type: str | None = None
    vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB_SIZE)]
    hidden_size: Annotated[int, Field(ge=1, le=MAX_HIDDEN_SIZE)]
    intermediate_size: Annotated[int, Field(ge=1, le=MAX_INTERMEDIATE_SIZE)]
    num_hidden_layers: Annotated[int, Field(ge=1, le=MAX_NUM_LAYERS)]
    num_attention_heads: Annotated[int, Field(ge=1, le=MAX_NUM_HEADS)]
    num_key_value_heads: Annotated[int, Field(ge=1, le=MAX_NUM_HEADS)] | None = None  # None: = attention heads
    head_dim: Annotated[int, Field(ge=1, le=MAX_HEAD_DIM)] | None = None  # None: hidden_size / heads
    rms_norm_eps: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 1e-6
    rope_theta: _Finite | None = None
    rope_parameters: RopeShape | None = None
    rope_scaling: RopeShape | None = None
    max_position_embeddings: Annotated[int, Field(ge=1, le=MAX_POSITIONS)] = 4096
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    bos_token_id: _TokenId | None = None
    eos_token_id: _TokenId | list[_TokenId] | None = None
    sliding_window: _Size | None = None
    use_sliding_window: bool | None = None
    max_window_layers: Annotated[int, Field(ge=0, le=MAX_NUM_LAYERS)] | None = None  # Qwen2/3: lower layers full
    layer_types: list[str] | None = None  # per layer "full_attention" | "sliding_attention" (models/config_attention.py)
    dtype: str | None = None
    torch_dtype: str | None = None
    # Mixture of experts (Qwen3-MoE; models/moe_from_hf.py reads them). transformers < 5 writes `num_experts`,
    # transformers 5 `num_local_experts` (as Mixtral always did).
    num_experts: Annotated[int, Field(ge=0, le=MAX_NUM_EXPERTS)] | None = None
    num_local_experts: Annotated[int, Field(ge=0, le=MAX_NUM_EXPERTS)] | None = None
    num_experts_per_tok: Annotated[int, Field(ge=1, le=MAX_NUM_EXPERTS)] | None = None
    moe_intermediate_size: Annotated[int, Field(ge=1, le=MAX_INTERMEDIATE_SIZE)] | None = None
    norm_topk_prob: bool | None = None  # None: the architecture's default (Qwen3-MoE no, GLM-4.5 yes)
    decoder_sparse_step: Annotated[int, Field(ge=1, le=MAX_NUM_LAYERS)] = 1
    mlp_only_layers: list[Annotated[int, Field(ge=0, lt=MAX_NUM_LAYERS)]] = []
    # GLM-4.5-style MoE.
    n_routed_experts: Annotated[int, Field(ge=1, le=MAX_NUM_EXPERTS)] | None = None
    n_shared_experts: Annotated[int, Field(ge=0, le=MAX_NUM_EXPERTS)] = 0
    routed_scaling_factor: _Finite = 1.0
    first_k_dense_replace: Annotated[int, Field(ge=0, le=MAX_NUM_LAYERS)] = 0
    n_group: Annotated[int, Field(ge=1, le=MAX_NUM_EXPERTS)] = 1
    topk_group: Annotated[int, Field(ge=1, le=MAX_NUM_EXPERTS)] = 1
    use_qk_norm: bool | None = None  # GLM-4.5 says; Qwen3 always has it
    partial_rotary_factor: Annotated[float, Field(gt=0, le=1)] | None = None  # GLM-4.5 (transformers < 5)
    # Multi-token-prediction modules shipped after the decoder: DeepSeek-V3 / GLM-4.5 (`model.layers.{L + i}.*`)
    # and Qwen3-Next (`mtp.*`); speculation/mtp reads them.
    num_nextn_predict_layers: Annotated[int, Field(ge=0, le=MAX_NUM_LAYERS)] = 0
    mtp_num_hidden_layers: Annotated[int, Field(ge=0, le=MAX_NUM_LAYERS)] = 0
    # gpt-oss: clamped SwiGLU experts; weights may be MXFP4-quantized (refused: models/config_arch.py).
    swiglu_alpha: _Finite | None = None
    swiglu_limit: _Finite | None = None
    quantization_config: dict[str, Any] | None = None
    # Gemma-2/3.
    query_pre_attn_scalar: _Finite | None = None  # attention scale is its inverse square root
    attn_logit_softcapping: _Finite | None = None
    final_logit_softcapping: _Finite | None = None
    rope_local_base_freq: _Finite | None = None  # Gemma-3 sliding layers' RoPE base (transformers < 5)
    sliding_window_pattern: Annotated[int, Field(ge=1, le=MAX_NUM_LAYERS)] | None = None  # every n-th layer global
    hidden_activation: str | None = None


def validated_shape(hf: dict[str, Any]) -> HFConfigShape:
    """The typed fields of `hf`, or one SpecbenchError naming the first bad field."""
    try:
        return HFConfigShape.model_validate(hf)
    except ValidationError as err:
        raise SpecbenchError(f"model config {first_error(err)}") from None

