"""The shape of a hybrid target's Gated DeltaNet layers, parsed from a Hugging Face config (Qwen3-Next, Qwen3.5)."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError
from specbench.recurrent.state_shape import StateLayout

_FIELDS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
           "linear_conv_kernel_dim")


@dataclass(frozen=True)
class GatedDeltaNetConfig:
    num_k_heads: int  # HF linear_num_key_heads
    num_v_heads: int  # HF linear_num_value_heads, a multiple of num_k_heads
    k_dim: int  # HF linear_key_head_dim
    v_dim: int  # HF linear_value_head_dim
    conv_kernel_size: int  # HF linear_conv_kernel_dim
    # How the checkpoint lays out the input projections. False (Qwen3-Next): in_proj_qkvz and in_proj_ba, interleaved
    # per key head ([q | k | v (group heads) | z (group heads)], [b (group) | a (group)]). True (Qwen3.5 / 3.6):
    # in_proj_qkv ([q all heads | k all heads | v all heads], the conv's channel order), in_proj_z, in_proj_b,
    # in_proj_a (value-head order). The same values reach the conv and the rule either way.
    is_split_projections: bool = False

    def __post_init__(self) -> None:
        if self.num_v_heads % self.num_k_heads:
            raise SpecbenchError(f"linear_num_value_heads ({self.num_v_heads}) must be a multiple of "
                                 f"linear_num_key_heads ({self.num_k_heads})")
        if self.conv_kernel_size < 2:
            raise SpecbenchError(f"linear_conv_kernel_dim must be >= 2, got {self.conv_kernel_size}")

    @property
    def key_size(self) -> int:
        return self.num_k_heads * self.k_dim

    @property
    def value_size(self) -> int:
        return self.num_v_heads * self.v_dim

    @property
    def conv_channels(self) -> int:
        return 2 * self.key_size + self.value_size

    def state_layout(self) -> StateLayout:
        """Conv over q, k, v; recurrent [num_v_heads, k_dim, v_dim]."""
        return StateLayout(self.conv_channels, self.conv_kernel_size - 1, (self.num_v_heads, self.k_dim, self.v_dim))

    def num_params(self, hidden_size: int) -> int:
        """One layer: qkvz and ba projections, conv, dt_bias + A_log, gated norm, out projection."""
        projections = hidden_size * (2 * self.key_size + 2 * self.value_size + 2 * self.num_v_heads)
        return (projections + self.conv_channels * self.conv_kernel_size + 2 * self.num_v_heads + self.v_dim
                + self.value_size * hidden_size)


def gated_delta_net_from_hf(hf: dict, is_split_projections: bool = False) -> GatedDeltaNetConfig:
    """The linear-attention fields of a Qwen3-Next / Qwen3.5 config.json; a missing or bad one is one
    SpecbenchError."""
    values = []
    for name in _FIELDS:
        value = hf.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecbenchError(f"model config field {name!r} must be a positive integer, got {value!r}")
        values.append(value)
    num_k, num_v, k_dim, v_dim, kernel = values
    return GatedDeltaNetConfig(num_k_heads=num_k, num_v_heads=num_v, k_dim=k_dim, v_dim=v_dim,
                               conv_kernel_size=kernel, is_split_projections=is_split_projections)
