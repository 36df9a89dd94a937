"""The shape of one request's recurrent state across a hybrid target's Gated DeltaNet layers: what the slots
(recurrent/state_cache.py) and the prefix-hit snapshots (recurrent/state_snapshots.py) both allocate."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StateShape:
    num_layers: int  # Gated DeltaNet layers (state layers), in model order
    conv_channels: int  # q, k and v channels the short convolution mixes (2 * key_dim + value_dim)
    conv_width: int  # kernel_size - 1 inputs the conv state carries
    num_v_heads: int
    k_dim: int
    v_dim: int

    def bytes_per_slot(self, dtype: torch.dtype) -> int:
        conv = self.conv_channels * self.conv_width * torch.empty((), dtype=dtype).element_size()
        return self.num_layers * (conv + self.num_v_heads * self.k_dim * self.v_dim * 4)
