"""The manifest's record of a target model config (runs/target_architecture.py: the record and its label)."""

from __future__ import annotations

import dataclasses
from typing import Any

from specbench.models.config import ModelConfig
from specbench.runs.target_architecture import ArchitectureRecord


def architecture_record(config: ModelConfig) -> ArchitectureRecord:
    moe = config.moe
    return ArchitectureRecord(
        architecture=config.architecture,
        num_layers=config.num_hidden_layers,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        num_params=config.num_params(),
        num_active_params=config.num_active_params(),
        num_experts=moe.num_experts if moe is not None else 0,
        num_experts_per_token=moe.num_experts_per_tok if moe is not None else 0,
        num_moe_layers=len(config.moe_layer_ids),
        shared_expert_size=moe.shared_intermediate_size if moe is not None else 0,
        attention=attention_text(config),
    )


def attention_text(config: ModelConfig) -> str:
    """The layers' attention kinds in words: "full", "window 4096" (every layer), or "window 128 on 12 of 24 layers,
    full elsewhere" (alternating local/global). No kinds declared: every layer attends to its whole context.
    What scores keys beyond that follows a "; ": "sinks" (gpt-oss), soft-caps, a local RoPE base (Gemma-3)."""
    extras = []
    if config.has_attention_sinks:
        extras.append("sinks")
    if config.attn_logit_softcapping is not None:
        extras.append(f"attention softcap {config.attn_logit_softcapping:g}")
    if config.final_logit_softcapping is not None:
        extras.append(f"logit softcap {config.final_logit_softcapping:g}")
    if config.sliding_rope_theta is not None:
        extras.append(f"local RoPE base {config.sliding_rope_theta:g}")
    kinds = _kinds_text(config)
    return "; ".join([kinds, ", ".join(extras)]) if extras else kinds


def _kinds_text(config: ModelConfig) -> str:
    windows = [kind.kv_window for kind in config.attention_kinds]
    sizes = sorted({w for w in windows if w is not None})
    if not sizes:
        return "full"
    num_windowed = sum(w is not None for w in windows)
    text = "window " + "/".join(str(w) for w in sizes)
    if num_windowed == config.num_hidden_layers:
        return text
    return f"{text} on {num_windowed} of {config.num_hidden_layers} layers, full elsewhere"


def record_entry(config: ModelConfig) -> dict[str, Any]:
    """The manifest's `models.target.architecture` object."""
    return dataclasses.asdict(architecture_record(config))


