"""Each layer's attention kind, the load-time check that the backend implements every one, and the per-forward step
that builds every kind's metadata onto a forward's metadata."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.attention.backend import AttentionBackend
from specbench.attention.kind_metadata import KindMetadata
from specbench.attention.kinds import ATTENTION_KINDS, AttentionKind, FullAttention
from specbench.attention.metadata import AttentionMetadata
from specbench.errors import SpecbenchError


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
        return all(k.is_full for k in self.kinds)

    def require_backend(self, backend: AttentionBackend) -> None:
        """Model load: `backend` implements every layer's kind; else one error naming the first kind it lacks, its
        layers and the registered kinds the backend implements (never full attention in its place)."""
        for kind in dict.fromkeys(self.kinds):
            if not implements(backend, type(kind)):
                layers = [i for i, k in enumerate(self.kinds) if k.name == kind.name]
                supported = [n for n in ATTENTION_KINDS.supported() if implements(backend, ATTENTION_KINDS.get(n))]
                raise SpecbenchError(f"attention backend {backend.name!r} does not implement attention kind "
                                     f"{kind.name!r} (layers {', '.join(map(str, layers))}); it implements: "
                                     f"{', '.join(supported)}")

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


def implements(backend: AttentionBackend, kind: type[AttentionKind]) -> bool:
    """What the backend declares: the kinds it names, and every key-window kind when it attends key windows."""
    # A recurrent-state kind's layers run their own state rule and never reach the backend.
    return (kind.name in backend.supported_kinds or (kind.is_key_window and backend.attends_key_windows)
            or kind.is_recurrent_state)
