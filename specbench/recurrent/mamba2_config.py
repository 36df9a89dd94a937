"""The shape of a hybrid target's Mamba-2 mixers, parsed from a Hugging Face config (Bamba's `mamba_*` fields).

in_proj gives [gate z (intermediate) | x B C (conv_channels) | dt (num_heads)]; the short conv mixes x, B and C;
x is num_heads heads of head_dim, B and C n_groups groups of state_size (a head reads group head // (H / G)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.errors import SpecbenchError
from specbench.recurrent.state_shape import StateLayout

_SIZES = ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv", "mamba_expand")


@dataclass(frozen=True)
class Mamba2Config:
    num_heads: int  # HF mamba_n_heads
    head_dim: int  # HF mamba_d_head (num_heads * head_dim == intermediate_size)
    num_groups: int  # HF mamba_n_groups: B and C are shared by num_heads // num_groups heads each
    state_size: int  # HF mamba_d_state
    conv_kernel_size: int  # HF mamba_d_conv
    intermediate_size: int  # mamba_expand * hidden_size
    has_conv_bias: bool = True  # HF mamba_conv_bias
    has_proj_bias: bool = False  # HF mamba_proj_bias (in_proj and out_proj)
    # dt after softplus is clamped to [lo, hi] (HF time_step_limit; the default (0, inf) leaves it alone)
    time_step_limit: tuple[float, float] = (0.0, math.inf)

    def __post_init__(self) -> None:
        if self.num_heads * self.head_dim != self.intermediate_size:
            raise SpecbenchError(f"mamba_n_heads * mamba_d_head ({self.num_heads} * {self.head_dim}) must equal "
                                 f"mamba_expand * hidden_size ({self.intermediate_size})")
        if self.num_heads % self.num_groups:
            raise SpecbenchError(f"mamba_n_heads ({self.num_heads}) must be a multiple of mamba_n_groups "
                                 f"({self.num_groups})")
        if self.conv_kernel_size < 2:
            raise SpecbenchError(f"mamba_d_conv must be >= 2, got {self.conv_kernel_size}")

    @property
    def conv_channels(self) -> int:
        """x, B and C: intermediate_size + 2 * num_groups * state_size."""
        return self.intermediate_size + 2 * self.num_groups * self.state_size

    def state_layout(self) -> StateLayout:
        """Conv over x, B, C; recurrent (SSM) [num_heads, head_dim, state_size]."""
        return StateLayout(self.conv_channels, self.conv_kernel_size - 1,
                           (self.num_heads, self.head_dim, self.state_size))

    def num_params(self, hidden_size: int) -> int:
        """One layer: in_proj, conv (+ bias), dt_bias + A_log + D, gated norm, out_proj (+ biases)."""
        projection = self.intermediate_size + self.conv_channels + self.num_heads
        params = (hidden_size * projection + self.conv_channels * self.conv_kernel_size + 3 * self.num_heads
                  + self.intermediate_size + self.intermediate_size * hidden_size)
        if self.has_conv_bias:
            params += self.conv_channels
        if self.has_proj_bias:
            params += projection + hidden_size
        return params


def json_float(value):
    """transformers writes infinity into config.json as {"__float__": "Infinity"}; anything else as it is."""
    if isinstance(value, dict) and isinstance(value.get("__float__"), str):
        try:
            return float(value["__float__"])
        except ValueError:
            return value
    return value


def mamba2_from_hf(hf: dict, hidden_size: int) -> Mamba2Config:
    """The Mamba-2 fields of a Bamba config.json; a missing or bad one is one SpecbenchError."""
    values = {}
    for name in _SIZES:
        value = hf.get(name)
        if name == "mamba_d_head" and value in (None, "auto") and isinstance(hf.get("mamba_n_heads"), int):
            value = hf.get("mamba_expand", 2) * hidden_size // hf["mamba_n_heads"]  # transformers' "auto"
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecbenchError(f"model config field {name!r} must be a positive integer, got {value!r}")
        values[name] = value
    limit = [json_float(v) for v in hf.get("time_step_limit") or (0.0, math.inf)]
    if (not isinstance(limit, (list, tuple)) or len(limit) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in limit) or limit[0] > limit[1]):
        raise SpecbenchError(f"model config field 'time_step_limit' must be [low, high], got {limit!r}")
    return Mamba2Config(
        num_heads=values["mamba_n_heads"], head_dim=values["mamba_d_head"], num_groups=values["mamba_n_groups"],
        state_size=values["mamba_d_state"], conv_kernel_size=values["mamba_d_conv"],
        intermediate_size=values["mamba_expand"] * hidden_size, has_conv_bias=bool(hf.get("mamba_conv_bias", True)),
        has_proj_bias=bool(hf.get("mamba_proj_bias", False)), time_step_limit=(float(limit[0]), float(limit[1])))
