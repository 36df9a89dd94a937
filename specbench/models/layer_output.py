"""What a decoder block hands the next one."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class LayerOutput:
    """A block's result, usually with its last residual add left undone: the next norm fuses it
    (stream = residual + hidden). The decode-batch path (`decode_gemv`) adds it in the down projection instead."""

    hidden: torch.Tensor  # [num_tokens, hidden] MLP output not yet added to `residual`; the stream if residual is None
    residual: torch.Tensor | None  # [num_tokens, hidden] residual stream after the attention add
    layer_input: torch.Tensor  # [num_tokens, hidden] residual stream entering the block (HF hidden_states[i])
