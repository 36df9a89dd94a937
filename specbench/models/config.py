"""Model shape and RoPE configuration, parsed from a Hugging Face `config.json`."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.attention.kinds import AttentionKind
from specbench.errors import SpecbenchError
from specbench.models.config_arch import (
    GEMMA2,
    GEMMA3,
    GEMMA_ARCHITECTURES,
    GPT_OSS,
    arch_features,
    refuse_quantized,
)
from specbench.models.config_attention import attention_kinds_from_hf
from specbench.models.config_hybrid import (BAMBA, GRANITE_HYBRID, QWEN3_NEXT, HybridFields, bamba_from_hf,
                                            QWEN3_5_DENSE, QWEN3_5_TEXT_MODELS, qwen3_5_architecture,
                                            granite_hybrid_from_hf, hybrid_from_hf, nemotron_h_from_hf)
from specbench.models.config_multimodal import text_config_of
from specbench.models.config_nemotron_h import NEMOTRON_H, nemotron_h_num_params, nemotron_h_shape_fields
from specbench.recurrent.config import GatedDeltaNetConfig
from specbench.recurrent.mamba2_config import Mamba2Config
from specbench.recurrent.state_shape import StateLayout
from specbench.models.moe_from_hf import REFUSED_ARCHITECTURES, moe_from_hf
from specbench.models.config_rope import RopeScaling, per_layer_type_rope, rope_from_hf
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
    "GptOssForCausalLM": GPT_OSS,
    "Gemma2ForCausalLM": GEMMA2,
    "Gemma3ForCausalLM": GEMMA3,
    "Qwen3NextForCausalLM": QWEN3_NEXT,
    **{architecture: QWEN3_NEXT for architecture in QWEN3_5_TEXT_MODELS.values()},
    "BambaForCausalLM": BAMBA,
    "NemotronHForCausalLM": NEMOTRON_H,
    "GraniteMoeHybridForCausalLM": GRANITE_HYBRID,
}
_MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3_moe",
                "mixtral": "mixtral", "glm4_moe": "glm4_moe", "gpt_oss": GPT_OSS, "gemma2": GEMMA2,
                "gemma3_text": GEMMA3, "qwen3_next": QWEN3_NEXT, "bamba": BAMBA,
                **{model_type: QWEN3_NEXT for model_type in QWEN3_5_TEXT_MODELS},
                NEMOTRON_H: NEMOTRON_H, GRANITE_HYBRID: GRANITE_HYBRID}
_QK_NORM_ARCHITECTURES = ("qwen3", "qwen3_moe", GEMMA3, QWEN3_NEXT)


@dataclass(frozen=True)
class ModelConfig:
    # "llama" | "qwen2" | "qwen3" | "qwen3_moe" | "mixtral" | "glm4_moe" | "gpt_oss" | "gemma2" | "gemma3" |
    # "qwen3_next" (also Qwen3.5 / 3.6) | "bamba" | "nemotron_h" | "granitemoehybrid"
    architecture: str
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
    # Multi-token-prediction modules the checkpoint ships after the decoder (the `mtp` proposer's); 0: none.
    num_mtp_modules: int = 0
    # [num_hidden_layers] each layer's attention kind (full, sliding window); () = every layer full attention.
    attention_kinds: tuple[AttentionKind, ...] = ()
    # Learned attention sinks: one softmax logit per query head in every layer, carrying no value (gpt-oss).
    has_attention_sinks: bool = False
    # Attention scale is query_pre_attn_scalar ** -0.5 (Gemma); None: head_dim ** -0.5.
    query_pre_attn_scalar: float | None = None
    # c * tanh(x / c) on attention scores before masking (Gemma-2) / on the output logits (Gemma-2/3); None: off.
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    # Gemma-3: the sliding-window layers' RoPE base (unscaled); None: every layer rotates with rope_theta/scaling.
    sliding_rope_theta: float | None = None
    # Hybrid targets (Qwen3-Next): the Gated DeltaNet layers' shape (their kind is GatedDeltaNetKind in
    # attention_kinds); None: no recurrent-state layers.
    gated_delta_net: GatedDeltaNetConfig | None = None
    # Qwen3-Next's partial RoPE: the first `partial_rotary_dim` dims of each head rotate (models/qwen3_next.py does it
    # directly, q carries an output gate GLM's weight permutation would scramble); None: rotary_dim's rule.
    partial_rotary_dim: int | None = None
    # Hybrid targets (Bamba): the Mamba-2 mixers' shape (their kind is Mamba2Kind); None: no Mamba-2 layers.
    mamba2: Mamba2Config | None = None
    # Nemotron-H (models/nemotron_h.py): [num_hidden_layers] each engine layer's HF blocks as pattern letters, its
    # mixer ('M' Mamba-2 or '*' attention) with the relu^2 MLP blocks ('-') it runs after (config_nemotron_h.py);
    # () other architectures.
    nemotron_blocks: tuple[str, ...] = ()
    mlp_bias: bool = False  # Nemotron-H's MLP blocks: biases on up_proj and down_proj
    # the checkpoint is a multimodal wrapper's (config_multimodal.py): its weights name the language model
    # `model.language_model.*` beside a vision tower the engine skips
    is_multimodal_wrapper: bool = False
    # False: attention rotates nothing (Nemotron-H; Granite-4 unless position_embedding_type is "rope").
    has_rope: bool = True
    # Granite-4's muP multipliers (models/granite_hybrid.py): embeddings times embedding_multiplier (None: off),
    # each block output times residual_multiplier before its add, q.k times attention_multiplier (None: the
    # attention_scale rule), logits divided by logits_scaling.
    embedding_multiplier: float | None = None
    residual_multiplier: float = 1.0
    attention_multiplier: float | None = None
    logits_scaling: float = 1.0

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
        if self.nemotron_blocks and len(self.nemotron_blocks) != self.num_hidden_layers:
            raise SpecbenchError(f"{len(self.nemotron_blocks)} Nemotron-H block groups for {self.num_hidden_layers} "
                                 "layers")
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
        # HF Llama/Qwen3/gpt-oss put `attention_bias` on all four projections; Qwen2 and GLM-4.5 only on q/k/v.
        return self.attention_bias and self.architecture not in ("qwen2", "glm4_moe")

    @property
    def is_hybrid(self) -> bool:
        """Some layers carry a per-request recurrent state (Gated DeltaNet, Mamba-2) beside full-attention layers."""
        return self.gated_delta_net is not None or self.mamba2 is not None

    @property
    def state_layout(self) -> StateLayout:
        """One state layer's per-request state (recurrent/state_shape.py): its kind's conv and recurrent parts."""
        mixer = self.gated_delta_net if self.gated_delta_net is not None else self.mamba2
        if mixer is None:
            raise SpecbenchError(f"a {self.architecture} model has no recurrent-state layers")
        return mixer.state_layout()

    @property
    def num_kv_layers(self) -> int:
        """Layers with K/V in the paged cache: every layer, or a hybrid's attention layers only (its Gated DeltaNet
        layers keep state slots instead)."""
        if not self.is_hybrid:
            return self.num_hidden_layers
        return sum(1 for k in self.attention_kinds if not k.is_recurrent_state)

    @property
    def has_offset_norms(self) -> bool:
        """RMSNorms computing x / rms(x) * (1 + weight) in fp32 (Gemma, Qwen3-Next)."""
        return self.is_gemma or self.architecture == QWEN3_NEXT

    @property
    def is_gemma(self) -> bool:
        """Gemma-2/3 blocks: (1 + weight) RMSNorms, sandwich norms around attention and MLP, GELU-tanh MLP,
        embeddings scaled by sqrt(hidden_size) (models/gemma.py)."""
        return self.architecture in GEMMA_ARCHITECTURES

    @property
    def attention_scale(self) -> float | None:
        """Softmax scale of q.k; None: the backends' default head_dim ** -0.5."""
        if self.attention_multiplier is not None:
            return self.attention_multiplier
        return None if self.query_pre_attn_scalar is None else self.query_pre_attn_scalar ** -0.5

    def num_params(self) -> int:
        """Parameter count of the model these shapes describe (tied embeddings counted once)."""
        if self.nemotron_blocks:
            return nemotron_h_num_params(self)
        h = self.hidden_size
        attn = h * (self.q_size + 2 * self.kv_size) + self.q_size * h
        if self.attention_bias:
            attn += self.q_size + 2 * self.kv_size + (h if self.has_o_proj_bias else 0)
        if self.use_qk_norm:
            attn += 2 * self.head_dim
        if self.has_attention_sinks:
            attn += self.num_attention_heads
        layer = attn + (4 if self.is_gemma else 2) * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        if self.is_hybrid:  # per layer its own mixer: attention (Qwen3-Next's gated: q_proj twice as wide) or a
            # recurrent one (Gated DeltaNet, Mamba-2)
            num_linear = sum(1 for k in self.attention_kinds if k.is_recurrent_state)
            num_attn = self.num_hidden_layers - num_linear
            if self.mamba2 is not None:
                mixers = num_linear * self.mamba2.num_params(h) + num_attn * attn
            else:
                mixers = num_linear * self.gated_delta_net.num_params(h) + num_attn * (attn + h * self.q_size)
            return embed + mixers + self.num_hidden_layers * 2 * h + self._num_mlp_params(active=False) + h
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
        hf, is_wrapper = text_config_of(hf)
        architecture = _architecture(hf)
        if architecture == NEMOTRON_H:
            hf = nemotron_h_shape_fields(hf)
        hf, per_layer_rope = per_layer_type_rope(hf)
        shape = validated_shape(hf)
        refuse_quantized(shape)
        heads = shape.num_attention_heads
        is_dense_qwen3_5 = qwen3_5_architecture(hf) == QWEN3_5_DENSE
        moe, moe_layer_ids = (None, ()) if is_dense_qwen3_5 else moe_from_hf(architecture, shape)
        head_dim = shape.head_dim or max(shape.hidden_size // heads, 1)
        rope = rope_from_hf(shape, per_layer_rope, head_dim)
        features = arch_features(architecture, shape)
        hybrid = (hybrid_from_hf(architecture, hf, shape, head_dim) if architecture == QWEN3_NEXT
                  else bamba_from_hf(hf, shape) if architecture == BAMBA
                  else nemotron_h_from_hf(hf) if architecture == NEMOTRON_H
                  else granite_hybrid_from_hf(hf, shape) if architecture == GRANITE_HYBRID else HybridFields())
        is_granite = architecture == GRANITE_HYBRID
        is_glm = architecture == "glm4_moe"  # its config says whether q/k are normed
        return ModelConfig(
            architecture=architecture,
            vocab_size=shape.vocab_size,
            hidden_size=shape.hidden_size,
            # Granite-4 without experts: its one MLP is the shared one
            intermediate_size=(_granite_shared_width(hf) if is_granite and moe is None else shape.intermediate_size),
            num_hidden_layers=shape.num_hidden_layers,
            num_attention_heads=heads,
            num_key_value_heads=shape.num_key_value_heads or heads,
            head_dim=head_dim,
            rms_norm_eps=shape.rms_norm_eps,
            rope_theta=rope.theta,
            rope_scaling=rope.scaling,
            max_position_embeddings=shape.max_position_embeddings,
            tie_word_embeddings=shape.tie_word_embeddings,
            # Qwen2 always has q/k/v bias; Llama and Qwen3 say so in `attention_bias`.
            # gpt-oss: transformers' default is True.
            attention_bias=architecture == "qwen2" or shape.attention_bias or (
                architecture == GPT_OSS and hf.get("attention_bias") is None),
            use_qk_norm=architecture in _QK_NORM_ARCHITECTURES or (is_glm and bool(shape.use_qk_norm)),
            bos_token_id=shape.bos_token_id,
            eos_token_ids=_eos_ids(shape.eos_token_id),
            checkpoint_dtype=shape.dtype or shape.torch_dtype,
            moe=moe,
            moe_layer_ids=moe_layer_ids,
            rotary_dim=None if architecture == QWEN3_NEXT else _rotary_dim(architecture, shape, head_dim),
            num_mtp_modules=shape.num_nextn_predict_layers or shape.mtp_num_hidden_layers,
            attention_kinds=hybrid.kinds or attention_kinds_from_hf(shape),
            has_attention_sinks=features.has_attention_sinks,
            query_pre_attn_scalar=features.query_pre_attn_scalar,
            attn_logit_softcapping=features.attn_logit_softcapping,
            final_logit_softcapping=features.final_logit_softcapping,
            sliding_rope_theta=rope.sliding_theta,
            gated_delta_net=hybrid.gated_delta_net,
            partial_rotary_dim=hybrid.partial_rotary_dim,
            mamba2=hybrid.mamba2,
            nemotron_blocks=hybrid.nemotron_blocks,
            is_multimodal_wrapper=is_wrapper,
            mlp_bias=architecture == NEMOTRON_H and bool(hf.get("mlp_bias", False)),
            # Nemotron-H's attention has no position encoding; Granite-4's only with position_embedding_type "rope"
            has_rope=architecture != NEMOTRON_H and (not is_granite or hf.get("position_embedding_type") == "rope"),
            **(_granite_multipliers(hf) if is_granite else {}),
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


def _rotary_dim(architecture: str, shape: HFConfigShape, head_dim: int) -> int | None:
    """GLM-4.5 and Bamba rotate part of each head (transformers' default factor for both is 0.5); others all of it."""
    params = shape.rope_parameters or shape.rope_scaling or RopeShape()
    factor = params.partial_rotary_factor or shape.partial_rotary_factor
    if architecture not in ("glm4_moe", BAMBA):
        if factor is not None and factor != 1.0:
            raise SpecbenchError(f"partial rotary embeddings (factor {factor}) are only supported for GLM-4.5 and "
                                 "Bamba")
        return None
    rotary_dim = int(head_dim * (0.5 if factor is None else factor))
    return None if rotary_dim == head_dim else rotary_dim


def _granite_shared_width(hf: dict) -> int:
    width = hf.get("shared_intermediate_size", 1024)  # transformers' default
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise SpecbenchError(f"model config field 'shared_intermediate_size' must be a positive integer, got {width!r}")
    return width


def _granite_multipliers(hf: dict) -> dict[str, float]:
    """Granite's muP multipliers (transformers' default 1.0 each); a bad one is one SpecbenchError naming it."""
    out = {}
    for name in ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"):
        value = hf.get(name)
        value = 1.0 if value is None else value
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < float("inf"):
            raise SpecbenchError(f"model config field {name!r} must be a positive number, got {value!r}")
        out[name] = float(value)
    return out


def _eos_ids(value: int | list[int] | None) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(value)
