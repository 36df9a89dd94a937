"""Each layer's attention kind, and the per-forward step that builds every kind's metadata onto a forward's metadata."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.attention.kind_metadata import KindMetadata
from specbench.attention.kinds import AttentionKind, FullAttention
from specbench.attention.metadata import AttentionMetadata


@dataclass(frozen=True)
class LayerKinds:
    kinds: tuple[AttentionKind, ...]  # [num_layers], what the model config declares

    @staticmethod
    def of(kinds: Sequence[AttentionKind], num_layers: int) -> LayerKinds:
        """`kinds` empty: every layer full attention (the config's default)."""
        kinds = tuple(kinds) or (FullAttention(),) * num_layers
        if len(kinds) != num_layers:
            raise ValueError(f"{len(kinds)} attention kinds for {num_layers} layers")
        return LayerKinds(kinds)

    @property
    def is_all_full(self) -> bool:
        """No kind adds anything to the causal contract: forwards run on the metadata exactly as built."""
        return all(isinstance(k, FullAttention) for k in self.kinds)

    def attach(self, md: AttentionMetadata, where: str) -> AttentionMetadata:
        """`md` with every layer's kind metadata, built now by each distinct kind's builder (once per kind, shared by
        its layers). Called by the model at the start of every forward; `where` names the phase, as begin_forward
        gets it."""
        if self.is_all_full:
            return md
        built: dict[AttentionKind, KindMetadata] = {}
        for kind in self.kinds:
            if kind not in built:
                built[kind] = kind.build(md)
        return dataclasses.replace(md, layer_kinds=tuple(built[k] for k in self.kinds))
