"""The shape of one request's recurrent state across a hybrid target's state layers: what the slots
(recurrent/state_cache.py) and the prefix-hit snapshots (recurrent/state_snapshots.py) both allocate.

Every recurrent layer kind keeps the same two parts, so the slots, the verify's kept positions, the commit (and its
mutants), the snapshots and the state oracle handle them without knowing the kind: a conv state (the last
kernel_size - 1 inputs of the short causal convolution, in the model's dtype) and a recurrent state (fp32). A kind
says only how wide each is (its config's `state_layout`, the StateLayout protocol):
- Gated DeltaNet (recurrent/config.py): conv over q, k, v; recurrent [num_v_heads, k_dim, v_dim];
- Mamba-2 (recurrent/mamba2_config.py): conv over x, B, C; recurrent [num_heads, head_dim, state_size].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class StateLayout:
    """One state layer's state: conv [conv_channels, conv_width] and recurrent `recurrent_dims` (fp32)."""

    conv_channels: int  # channels the short convolution mixes
    conv_width: int  # kernel_size - 1 inputs the conv state carries
    recurrent_dims: tuple[int, ...]  # the recurrent state's shape per request and layer


class HasStateLayout(Protocol):
    """A recurrent layer kind's config (GatedDeltaNetConfig, Mamba2Config)."""

    def state_layout(self) -> StateLayout: ...


@dataclass(frozen=True)
class StateShape:
    num_layers: int  # state layers, in model order
    conv_channels: int
    conv_width: int
    recurrent_dims: tuple[int, ...]  # e.g. [num_v_heads, k_dim, v_dim] (Gated DeltaNet), [heads, head_dim, state]

    @staticmethod
    def of(layout: StateLayout, num_layers: int) -> StateShape:
        return StateShape(num_layers, layout.conv_channels, layout.conv_width, tuple(layout.recurrent_dims))

    @property
    def recurrent_size(self) -> int:
        """fp32 elements of one layer's recurrent state of one request."""
        return math.prod(self.recurrent_dims)

    def bytes_per_slot(self, dtype: torch.dtype) -> int:
        conv = self.conv_channels * self.conv_width * torch.empty((), dtype=dtype).element_size()
        return self.num_layers * (conv + self.recurrent_size * 4)
