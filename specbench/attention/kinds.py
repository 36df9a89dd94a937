"""The attention-kind plug point: each layer's kind is declared by the model config; one builder per kind makes that
kind's metadata for every forward; backends implement kinds (they read the kind metadata of the layer they run).

Adding a kind = a class here registered in ATTENTION_KINDS (its builder), its metadata in kind_metadata.py, the
backends' kernels, and tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from specbench.attention.kind_metadata import FullAttentionMetadata, KindMetadata, WindowMetadata
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.window import check_window
from specbench.registry import Registry


class AttentionKind(Protocol):
    name: str

    def build(self, md: AttentionMetadata) -> KindMetadata:
        """This kind's metadata for the forward `md` describes, from its device tensors only (no host sync, so a
        CUDA graph captures the builder and every replay rebuilds it from the replay's own positions)."""


@dataclass(frozen=True)
class FullAttention:
    name = "full"

    def build(self, md: AttentionMetadata) -> KindMetadata:
        return _FULL


@dataclass(frozen=True)
class SlidingWindowAttention:
    window: int  # keys each query sees, itself included (HF `sliding_window`)
    name = "sliding_window"

    def __post_init__(self) -> None:
        check_window(self.window)

    def build(self, md: AttentionMetadata) -> KindMetadata:
        # positions[t] is query t's own position (INV-0), so its window starts w - 1 keys before it.
        starts = (md.positions - (self.window - 1)).clamp_(min=0).to(md.seq_lens.dtype)  # [num_tokens] int32
        return WindowMetadata(sliding_window=self.window, window_starts=starts)


_FULL = FullAttentionMetadata()

ATTENTION_KINDS: Registry[AttentionKind] = Registry("attention kind")
ATTENTION_KINDS.register("full")(FullAttention)
ATTENTION_KINDS.register("sliding_window")(SlidingWindowAttention)
