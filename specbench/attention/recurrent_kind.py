"""The recurrent-state kinds: a layer that mixes tokens through a per-request state (Gated DeltaNet, Mamba-2), not by
attending the paged KV. Its layers never call the attention backend, so every backend "implements" it
(layer_kinds.implements); what it needs per forward is which state slot each request owns (recurrent/state_rows.py),
which the engine attaches to the metadata, not this builder (slots are the engine's, not the positions')."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specbench.attention.kind_metadata import KindMetadata
from specbench.attention.kinds import register_kind
from specbench.attention.metadata import AttentionMetadata


@dataclass(frozen=True, slots=True)
class RecurrentStateMetadata(KindMetadata):
    """Adds nothing per token: the layer reads its state rows from AttentionMetadata.state_rows."""


@register_kind
@dataclass(frozen=True)
class GatedDeltaNetKind:
    name: ClassVar[str] = "gated_delta_net"
    hf_layer_types: ClassVar[tuple[str, ...]] = ("linear_attention",)
    is_full: ClassVar[bool] = False
    is_key_window: ClassVar[bool] = False
    is_recurrent_state: ClassVar[bool] = True  # no attention backend involved (layer_kinds.implements)
    verifies_trees: ClassVar[bool] = True  # recurrent/tree_verify.py: each node from its parent's state

    @classmethod
    def from_hf(cls, sliding_window: int) -> GatedDeltaNetKind:
        return cls()

    def __str__(self) -> str:
        return "a Gated DeltaNet recurrent state"

    @property
    def kv_window(self) -> int | None:
        return None  # it reads no KV, but the hybrid's full-attention layers keep every key

    def build(self, md: AttentionMetadata) -> KindMetadata:
        return RecurrentStateMetadata(self)

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        pass  # its state is checked against a recomputation by the state oracle (check/state_oracle.py)


@register_kind
@dataclass(frozen=True)
class Mamba2Kind:
    """A Mamba-2 mixer (Bamba): a per-request conv + SSM state, the same slots as Gated DeltaNet's."""

    name: ClassVar[str] = "mamba2"
    # none: Bamba names its attention layers by index (models/config_hybrid.py), and no supported architecture lists
    # Mamba-2 layers in `layer_types` (Nemotron-H / Granite-4 say "mamba": theirs to register when they come)
    hf_layer_types: ClassVar[tuple[str, ...]] = ()
    is_full: ClassVar[bool] = False
    is_key_window: ClassVar[bool] = False
    is_recurrent_state: ClassVar[bool] = True
    verifies_trees: ClassVar[bool] = False  # the Mamba-2 mixer has no tree verify yet (chains only)

    @classmethod
    def from_hf(cls, sliding_window: int) -> Mamba2Kind:
        return cls()

    def __str__(self) -> str:
        return "a Mamba-2 recurrent state"

    @property
    def kv_window(self) -> int | None:
        return None

    def build(self, md: AttentionMetadata) -> KindMetadata:
        return RecurrentStateMetadata(self)

    def check(self, built: KindMetadata, md: AttentionMetadata, layer: int, where: str) -> None:
        pass  # the state oracle checks its state (check/state_oracle.py)
