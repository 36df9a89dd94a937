"""The memory-bandwidth floor of one step of a hybrid target (Qwen3-Next): specbench/perf/moe_floor.py's bytes (every
dense weight once: attention, Gated DeltaNet projections and conv, routers, shared experts, the LM head; of each MoE
layer only the experts the step wakes; the full-attention layers' K/V) plus the recurrent state each Gated DeltaNet
layer must read and write for every request of the step.

State per request per Gated DeltaNet layer: the recurrent state [num_v_heads, k_dim, v_dim] fp32 and the conv state
[conv_channels, kernel - 1] in the model's dtype, each read once and written once. That is the least any step moves,
a decode or a verify of k + 1 tokens alike (a fused kernel keeps the state on chip across the k + 1 positions); the
engine moves more today (a verify keeps every position's state, then the commit copies one: see hybrid_targets.md),
which the floor deliberately does not count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.errors import SpecbenchError
from specbench.models.presets import MODEL_PRESETS, get_preset
from specbench.perf.moe_floor import StepBytes
from specbench.perf.moe_targets import cut_layers
from specbench.recurrent.state_shape import StateShape


def state_bytes_per_step(shape: StateShape, conv_dtype: torch.dtype, num_reqs: int) -> int:
    """Bytes of recurrent + conv state one step reads and writes: read once and written once per request per layer."""
    conv = shape.conv_channels * shape.conv_width * torch.empty((), dtype=conv_dtype).element_size()
    recurrent = shape.recurrent_size * 4  # fp32
    return 2 * num_reqs * shape.num_layers * (conv + recurrent)


def expected_distinct_experts(num_experts: int, top_k: int, num_tokens: int) -> float:
    """Distinct experts `num_tokens` tokens wake under uniform, independent routing (each token's top_k distinct):
    E * (1 - (1 - k / E) ** t). The stated estimate where the routing probe saw no step of that size."""
    return num_experts * (1 - (1 - top_k / num_experts) ** num_tokens)


@dataclass(frozen=True)
class HybridStepBytes:
    weights_kv: StepBytes  # dense weights, embedding rows, woken experts, the attention layers' K/V
    state: int  # Gated DeltaNet state read + written (state_bytes_per_step)

    @property
    def total(self) -> int:
        return self.weights_kv.total + self.state

    def floor_ms(self, bandwidth_gbps: float) -> float:
        return self.total / (bandwidth_gbps * 1e9) * 1e3

    def to_dict(self) -> dict:
        return {**self.weights_kv.to_dict(), "state_gb": self.state / 1e9, "total_gb": self.total / 1e9}


def is_whole_pattern(kinds: tuple, num_layers: int) -> bool:
    """A cut to the first num_layers layers ends on a full-attention layer (Qwen3-Next's 3 DeltaNet + 1 attention
    pattern holds: num_layers a multiple of 4)."""
    return 1 <= num_layers <= len(kinds) and not kinds[num_layers - 1].is_recurrent_state


def cut_preset(preset: str, num_layers: int | None) -> tuple[str, str]:
    """(the preset the engine loads, the cut's note): the first num_layers layers of a hybrid preset, registered in
    this process (scripts/bench_hybrid.py, scripts/profile_step.py)."""
    config = get_preset(preset)
    if num_layers is None or num_layers == config.num_hidden_layers:
        return preset, f"all {config.num_hidden_layers} layers"
    if not config.is_hybrid or not is_whole_pattern(config.attention_kinds, num_layers):
        raise SpecbenchError(f"--layers {num_layers} must cut {preset} after a full-attention layer (a multiple of "
                             "4 for Qwen3-Next) so the DeltaNet/attention pattern holds")
    name = f"{preset}@{num_layers}-layers"
    if name not in MODEL_PRESETS:
        cut = cut_layers(config, num_layers)
        MODEL_PRESETS.register(name)(lambda: cut)
    share = num_layers / config.num_hidden_layers
    return name, f"first {num_layers} of {config.num_hidden_layers} layers (~{share:.0%} of the model)"
