"""Model shape and RoPE configuration, parsed from a Hugging Face `config.json`."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.attention.kinds import AttentionKind
from specbench.errors import SpecbenchError
from specbench.models.config_attention import attention_kinds_from_hf
from specbench.models.config_moe import REFUSED_ARCHITECTURES, moe_from_hf
from specbench.models.config_shape import HFConfigShape, RopeShape, validated_shape
from specbench.models.moe_config import MoeConfig

# HF `architectures[0]` / `model_type` -> our architecture family.
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "MixtralForCausalLM": "mixtral",
    "Glm4MoeForCausalLM": "glm4_moe",
}
_MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3_moe",
                "mixtral": "mixtral", "glm4_moe": "glm4_moe"}
_QK_NORM_ARCHITECTURES = ("qwen3", "qwen3_moe")
_ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True)
class RopeScaling:
    rope_type: str  # "linear" | "llama3"
    factor: float
    # llama3 only: wavelengths between these bands are smoothly interpolated.
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    architecture: str  # "llama" | "qwen2" | "qwen3" | "qwen3_moe" | "mixtral" | "glm4_moe"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: RopeScaling | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool  # bias on q/k/v projections (Qwen2)
    use_qk_norm: bool  # per-head RMSNorm on q and k before RoPE (Qwen3)
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    checkpoint_dtype: str | None = None  # "bfloat16" etc. as stored; used by dtype "auto"
    moe: MoeConfig | None = None  # the routed-expert MLP of the layers in moe_layer_ids; None: dense model
    moe_layer_ids: tuple[int, ...] = ()  # layers whose MLP is `moe`; the others are dense (intermediate_size)
    # RoPE rotates the first rotary_dim dims of each head and passes the rest through (GLM-4.5); None: all of them.
    rotary_dim: int | None = None
    # [num_hidden_layers] each layer's attention kind (full, sliding window); () = every layer full attention.
    attention_kinds: tuple[AttentionKind, ...] = ()

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise SpecbenchError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.rotary_dim is not None and (self.rotary_dim % 2 or not 0 < self.rotary_dim < self.head_dim):
            raise SpecbenchError(f"rotary_dim {self.rotary_dim} must be even and in (0, head_dim {self.head_dim})")
        if (self.moe is None) != (not self.moe_layer_ids):
            raise SpecbenchError("a MoE config needs its layer ids and layer ids need a MoE config")
        bad = [i for i in self.moe_layer_ids if not 0 <= i < self.num_hidden_layers]
        if bad:
            raise SpecbenchError(f"MoE layer ids {bad} out of range [0, {self.num_hidden_layers})")
        if self.attention_kinds and len(self.attention_kinds) != self.num_hidden_layers:
            raise SpecbenchError(f"{len(self.attention_kinds)} attention kinds for {self.num_hidden_layers} layers")

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def has_o_proj_bias(self) -> bool:
        # HF Llama/Qwen3 put `attention_bias` on all four projections; Qwen2 and GLM-4.5 only on q/k/v.
        return self.attention_bias and self.architecture not in ("qwen2", "glm4_moe")

    def num_params(self) -> int:
        """Parameter count of the model these shapes describe (tied embeddings counted once)."""
        h = self.hidden_size
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        if self.attention_bias:
            attn += self.q_size + 2 * self.kv_size + (h if self.has_o_proj_bias else 0)
        if self.use_qk_norm:
            attn += 2 * self.head_dim
        layer = attn + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return embed + self.num_hidden_layers * layer + self._num_mlp_params(active=False) + h

    def num_active_params(self) -> int:
        """Parameters one token reads: num_params with each MoE layer's unrouted experts left out."""
        return self.num_params() - self._num_mlp_params(active=False) + self._num_mlp_params(active=True)

    def _num_mlp_params(self, *, active: bool) -> int:
        num_moe = len(self.moe_layer_ids)
        dense = (self.num_hidden_layers - num_moe) * 3 * self.hidden_size * self.intermediate_size
        if self.moe is None:
            return dense
        return dense + num_moe * (self.moe.num_active_params() if active else self.moe.num_params())

    def is_moe_layer(self, layer_idx: int) -> bool:
        return layer_idx in self.moe_layer_ids

    @staticmethod
    def from_hf(hf: dict) -> ModelConfig:
        """Parse and validate a config.json object; any bad field is one SpecbenchError naming it."""
        if not isinstance(hf, dict):
            raise SpecbenchError(f"model config must be a JSON object, got {type(hf).__name__}")
        architecture = _architecture(hf)
        shape = validated_shape(hf)
        heads = shape.num_attention_heads
        theta, scaling = _rope(shape)
        moe, moe_layer_ids = moe_from_hf(architecture, shape)
        head_dim = shape.head_dim or max(shape.hidden_size // heads, 1)
        is_glm = architecture == "glm4_moe"  # its config says whether q/k are normed
        return ModelConfig(
            architecture=architecture,
            vocab_size=shape.vocab_size,
            hidden_size=shape.hidden_size,
            intermediate_size=shape.intermediate_size,
            num_hidden_layers=shape.num_hidden_layers,
            num_attention_heads=heads,
            num_key_value_heads=shape.num_key_value_heads or heads,
            head_dim=head_dim,
            rms_norm_eps=shape.rms_norm_eps,
            rope_theta=theta,
            rope_scaling=scaling,
            max_position_embeddings=shape.max_position_embeddings,
            tie_word_embeddings=shape.tie_word_embeddings,
            # Qwen2 always has q/k/v bias; Llama and Qwen3 say so in `attention_bias`.
            attention_bias=architecture == "qwen2" or shape.attention_bias,
            use_qk_norm=architecture in _QK_NORM_ARCHITECTURES or (is_glm and bool(shape.use_qk_norm)),
            bos_token_id=shape.bos_token_id,
            eos_token_ids=_eos_ids(shape.eos_token_id),
            checkpoint_dtype=shape.dtype or shape.torch_dtype,
            moe=moe,
            moe_layer_ids=moe_layer_ids,
            rotary_dim=_rotary_dim(architecture, shape, head_dim),
            attention_kinds=attention_kinds_from_hf(shape),
        )


def _architecture(hf: dict) -> str:
    names = hf.get("architectures") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise SpecbenchError(f"model config field 'architectures' must be a list of strings, got {names!r}")
    for name in names:
        if name in _ARCHITECTURES:
            return _ARCHITECTURES[name]
    model_type = hf.get("model_type")
    if not names and model_type in _MODEL_TYPES:
        return _MODEL_TYPES[model_type]
    refused = next((REFUSED_ARCHITECTURES[n] for n in names if n in REFUSED_ARCHITECTURES), None)
    if refused is not None:
        raise SpecbenchError(f"unsupported architecture: {refused}")
    found = names[0] if names else model_type
    raise SpecbenchError(
        f"unsupported architecture {found!r}; supported: {', '.join(sorted(_ARCHITECTURES))}"
    )


def _rope(shape: HFConfigShape) -> tuple[float, RopeScaling | None]:
    """(rope_theta, scaling) from either the transformers>=5 `rope_parameters` or the older fields."""
    params = shape.rope_parameters or shape.rope_scaling or RopeShape()
    theta = params.rope_theta or shape.rope_theta or 10000.0
    rope_type = params.rope_type or params.type or "default"
    if rope_type not in _ROPE_TYPES:
        raise SpecbenchError(f"unsupported rope_scaling type {rope_type!r}; supported: {', '.join(_ROPE_TYPES)}")
    if rope_type == "default":
        return theta, None
    if params.factor is None:
        raise SpecbenchError(f"model config is missing required field 'factor' (rope type {rope_type})")
    if rope_type == "linear":
        return theta, RopeScaling(rope_type="linear", factor=params.factor)
    llama3 = ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    missing = [name for name in llama3 if getattr(params, name) is None]
    if missing:
        raise SpecbenchError(f"model config is missing required field {missing[0]!r} (rope type llama3)")
    return theta, RopeScaling(
        rope_type="llama3",
        factor=params.factor,
        low_freq_factor=params.low_freq_factor,
        high_freq_factor=params.high_freq_factor,
        original_max_position_embeddings=params.original_max_position_embeddings,
    )


def _rotary_dim(architecture: str, shape: HFConfigShape, head_dim: int) -> int | None:
    """GLM-4.5 rotates part of each head (transformers' default factor for it is 0.5); others all of it."""
    params = shape.rope_parameters or shape.rope_scaling or RopeShape()
    factor = params.partial_rotary_factor or shape.partial_rotary_factor
    if architecture != "glm4_moe":
        if factor is not None and factor != 1.0:
            raise SpecbenchError(f"partial rotary embeddings (factor {factor}) are only supported for GLM-4.5")
        return None
    rotary_dim = int(head_dim * (0.5 if factor is None else factor))
    return None if rotary_dim == head_dim else rotary_dim


def _eos_ids(value: int | list[int] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(value)
