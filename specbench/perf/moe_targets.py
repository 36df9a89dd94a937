"""The MoE targets of scripts/bench_gpu.py's `moe` suite: which model preset each row runs, which transformers
model the HF baseline builds for it, and what (if anything) differs from the real model.

gpt-oss-20b runs from the registered `gpt-oss-20b` preset where there is one. Where there is none, the bench builds
a stand-in of its shapes here, in the bench's own table: a MoE decoder with gpt-oss-20b's widths, heads, experts
(32, top 4, width 2880, biases, clamped SwiGLU, top-k softmax with router bias) and alternating 128-token sliding /
full attention, but without attention sinks (64 floats a layer: nothing in the byte count) and with plain RoPE
instead of YaRN (the same work). The HF baseline builds the real GptOssForCausalLM of those shapes.

`num_layers` cuts a target to its first layers (engine and HF alike) when a run must fit less time or memory;
rows then say so in their label.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specbench.attention.kinds import FullAttention, SlidingWindowAttention
from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.models.moe_config import MoeConfig
from specbench.models.presets import MODEL_PRESETS, get_preset


def gpt_oss_20b_standin() -> ModelConfig:
    num_layers = 24
    kinds = tuple(SlidingWindowAttention(128) if i % 2 == 0 else FullAttention() for i in range(num_layers))
    return ModelConfig(
        architecture="mixtral", vocab_size=201088, hidden_size=2880, intermediate_size=2880,
        num_hidden_layers=num_layers, num_attention_heads=64, num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5,
        rope_theta=150000.0, rope_scaling=None, max_position_embeddings=131072, tie_word_embeddings=False,
        attention_bias=True, use_qk_norm=False, bos_token_id=199998, eos_token_ids=(200002, 199999),
        checkpoint_dtype="bfloat16",
        moe=MoeConfig(hidden_size=2880, num_experts=32, num_experts_per_tok=4, moe_intermediate_size=2880,
                      scoring="topk_softmax", norm_topk_prob=False, has_router_bias=True, has_expert_bias=True,
                      activation="swiglu_oai"),
        moe_layer_ids=tuple(range(num_layers)), attention_kinds=kinds,
    )


@dataclass(frozen=True)
class MoeBenchTarget:
    name: str  # the row label
    preset: str  # the registered model preset the engine loads (dummy weights)
    hf_model_type: str  # the transformers model the HF baseline builds with the same shapes
    note: str  # how the engine's model differs from the real one; "" if it does not

    @property
    def config(self) -> ModelConfig:
        return get_preset(self.preset)


# name -> (preset if registered, HF model type, the stand-in's factory and note when the preset is not registered)
_TARGETS = {
    "qwen3-30b-a3b": ("qwen3-30b-a3b", "qwen3_moe", None, ""),
    "gpt-oss-20b": ("gpt-oss-20b", "gpt_oss", gpt_oss_20b_standin,
                    "stand-in: no attention sinks, plain RoPE (no gpt-oss-20b preset registered)"),
}
TARGET_NAMES = tuple(_TARGETS)


def _register(name: str, config: ModelConfig) -> str:
    if name not in MODEL_PRESETS:
        MODEL_PRESETS.register(name)(lambda: config)
    return name


def cut_layers(config: ModelConfig, num_layers: int) -> ModelConfig:
    """The first num_layers layers of `config` (its MoE layer ids and attention kinds cut alike)."""
    if not 1 <= num_layers <= config.num_hidden_layers:
        raise SpecbenchError(f"--moe-layers {num_layers} must be in [1, {config.num_hidden_layers}]")
    moe_ids = tuple(i for i in config.moe_layer_ids if i < num_layers)
    return replace(config, num_hidden_layers=num_layers, moe_layer_ids=moe_ids,
                   moe=config.moe if moe_ids else None, attention_kinds=config.attention_kinds[:num_layers])


def resolve_target(name: str, num_layers: int | None = None) -> MoeBenchTarget:
    """The target `name` with its preset registered (stand-in or layer cut registered in this process only)."""
    if name not in _TARGETS:
        raise SpecbenchError(f"unknown MoE bench target {name!r}; supported: {', '.join(_TARGETS)}")
    preset, hf_model_type, standin, standin_note = _TARGETS[name]
    note = ""
    if preset not in MODEL_PRESETS:
        if standin is None:
            raise SpecbenchError(f"MoE bench target {name!r} needs the model preset {preset!r}")
        preset, note = _register(f"{preset}-standin", standin()), standin_note
    if num_layers is not None and num_layers != get_preset(preset).num_hidden_layers:
        preset = _register(f"{preset}@{num_layers}-layers", cut_layers(get_preset(preset), num_layers))
        note = "; ".join(filter(None, [note, f"first {num_layers} layers only (engine and HF alike)"]))
    return MoeBenchTarget(name=name, preset=preset, hf_model_type=hf_model_type, note=note)
