"""A run's target in words, as the manifest records it (backends/target_record.py writes it) and summaries and
compare print it: the architecture, its size, its experts and its attention, so that a before/after of a MoE or
sliding-window run says what it ran on. Torch-free: compare and the HTTP client path read it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ArchitectureRecord:
    architecture: str  # ModelConfig.architecture ("llama", "qwen3_moe", ...)
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_params: int  # every parameter (tied embeddings once)
    num_active_params: int  # what one token reads: unrouted experts left out (== num_params for a dense model)
    num_experts: int  # routed experts per MoE layer; 0: dense
    num_experts_per_token: int  # top-k routing; 0: dense
    num_moe_layers: int
    shared_expert_size: int  # the shared expert's width; 0: none
    # the layers' attention kinds, e.g. "full" or "window 4096 on 24 of 48 layers, full elsewhere", then after "; "
    # what else scores keys ("sinks", "logit softcap 30", "local RoPE base 10000")
    attention: str

    def label(self) -> str:
        """One line: `qwen3_moe 48L h2048 30.5B (3.3B active), 128 experts top-8 on 48 layers, full attention`."""
        size = _billions(self.num_params)
        if self.num_active_params != self.num_params:
            size += f" ({_billions(self.num_active_params)} active)"
        parts = [f"{self.architecture} {self.num_layers}L h{self.hidden_size} {size}"]
        if self.num_experts:
            shared = f" + shared {self.shared_expert_size}" if self.shared_expert_size else ""
            parts.append(f"{self.num_experts} experts top-{self.num_experts_per_token}{shared} "
                         f"on {self.num_moe_layers} layers")
        kinds, _, extras = self.attention.partition("; ")  # extras: sinks, soft-caps (backends/target_record.py)
        attention = "full attention" if kinds == "full" else f"sliding-window attention ({kinds})"
        parts.append(f"{attention} with {extras}" if extras else attention)
        return ", ".join(parts)


def label_from_entry(entry: Any) -> str:
    """The label of a manifest's architecture object; "-" when absent (an HTTP server's model, an older run) or
    not the shape this module writes."""
    if not isinstance(entry, dict):
        return "-"
    names = {f.name for f in dataclasses.fields(ArchitectureRecord)}
    if set(entry) != names:
        return "-"
    try:
        return ArchitectureRecord(**entry).label()
    except (TypeError, ValueError):
        return "-"


def _billions(num: int) -> str:
    if num >= 10**9:
        return f"{num / 1e9:.1f}B"
    if num >= 10**6:
        return f"{num / 1e6:.1f}M"
    return f"{num / 1e3:.1f}K"
