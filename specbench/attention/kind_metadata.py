"""Per-kind attention metadata: what one attention kind adds to a forward's AttentionMetadata.

Built by the kind's builder (`kinds.py`) from the forward's own positions on every forward (prefill, verify, catch-up,
each draft step, each CUDA-graph replay): nothing position-dependent is carried from one forward to the next (the seed
bug class of DeepSeek-V4's `decode_swa_indices` not rebuilt between draft steps).

Backends read a layer's kind metadata through its methods, never by its type: `kind` names the kind that built it
(the backend implements it, or the model refused the backend at load), `key_window()` is what a masking kernel needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from specbench.errors import SpecbenchError


class BuildingKind(Protocol):
    """What a kind's metadata, and a backend reading it, know of the kind that built it. Every `AttentionKind`
    (kinds.py) is one; declared here, narrower, because kinds.py builds these metadata and imports this module."""

    name: ClassVar[str]
    is_full: ClassVar[bool]


class KeyWindow(Protocol):
    """A causal mask cut at each query's first visible key: query t sees keys window_starts[t] .. positions[t]."""

    sliding_window: int  # w: no query sees more than w keys (sizes a kernel's key splits)
    window_starts: torch.Tensor  # [num_tokens] int32, first key position each query token sees


@dataclass(frozen=True, slots=True)
class KindMetadata:
    """Base of every kind's metadata."""

    kind: BuildingKind  # the kind whose builder made it

    def key_window(self) -> KeyWindow | None:
        """What a masking kernel (torch reference, Triton) needs to attend this layer; None: plain causal. A kind
        that is not a window over the causal keys leaves this as is: a masking backend must not attend it."""
        raise SpecbenchError(f"attention kind {self.kind.name!r} is not a window over the causal keys; "
                             "a masking kernel cannot attend it")


@dataclass(frozen=True, slots=True)
class FullAttentionMetadata(KindMetadata):
    """Adds nothing to the causal contract."""

    def key_window(self) -> KeyWindow | None:
        return None


@dataclass(frozen=True, slots=True)
class WindowMetadata(KindMetadata):
    # [num_tokens] int32, first key position each query token sees; keys window_starts[t] .. positions[t]
    window_starts: torch.Tensor

    @property
    def sliding_window(self) -> int:
        """w: a query at position p sees keys max(0, p - w + 1) .. p (window.py)."""
        return self.kind.window  # built by a window kind (kinds.py: SlidingWindowAttention)

    def key_window(self) -> KeyWindow | None:
        return self
