"""Per-kind attention metadata: what one attention kind adds to a forward's AttentionMetadata.

Built by the kind's builder (`kinds.py`) from the forward's own positions on every forward (prefill, verify, catch-up,
each draft step, each CUDA-graph replay): nothing position-dependent is carried from one forward to the next (the seed
bug class of DeepSeek-V4's `decode_swa_indices` not rebuilt between draft steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class KindMetadata:
    """Base of every kind's metadata; `FullAttentionMetadata` adds nothing to the causal contract."""


@dataclass(frozen=True, slots=True)
class FullAttentionMetadata(KindMetadata):
    pass


@dataclass(frozen=True, slots=True)
class WindowMetadata(KindMetadata):
    sliding_window: int  # w: a query at position p sees keys max(0, p - w + 1) .. p (window.py)
    # [num_tokens] int32, first key position each query token sees; keys window_starts[t] .. positions[t]
    window_starts: torch.Tensor
