"""How a layer scores its keys beyond q.k and the mask: the softmax scale, logit soft-capping and attention sinks.

Attention kinds (kinds.py) say which keys a query sees and are rebuilt from positions on every forward; these are
the layer's own constants and parameters (gpt-oss's learned sinks are weights), handed to the backend with each call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class ScoreParams:
    scale: float | None = None  # softmax scale of q.k; None: head_dim ** -0.5
    softcap: float | None = None  # c: scores become c * tanh(scores / c) after scaling, before masking (Gemma-2)
    # [num_heads] one extra logit per query head in every softmax, carrying no value (gpt-oss); None: none
    sinks: torch.Tensor | None = None

    @property
    def is_plain(self) -> bool:
        """Scaled dot-product softmax attention: what every backend runs without being told more."""
        return self.scale is None and self.softcap is None and self.sinks is None


PLAIN = ScoreParams()
