"""Bending a model's attention-kind metadata from outside (the sliding-window mutants' one tool).

The model calls `self.layer_kinds.attach(md, phase)` at the start of every forward. `bend_layer_kinds` swaps that
model's LayerKinds for a stand-in whose attach returns `bend(clean, phase)`; its declaration (`kinds`) stays the
model config's, so the debug invariant (INV-KIND) still compares the bent metadata against the truth.
"""

from __future__ import annotations

from collections.abc import Callable

from specbench.attention.layer_kinds import LayerKinds
from specbench.attention.metadata import AttentionMetadata

Bend = Callable[[AttentionMetadata, str], AttentionMetadata]  # (the cleanly attached metadata, phase) -> bent


class _BentLayerKinds:
    def __init__(self, clean: LayerKinds, bend: Bend) -> None:
        self.kinds = clean.kinds  # [num_layers] the declaration, untouched
        self._clean = clean
        self._bend = bend

    def attach(self, md: AttentionMetadata, where: str) -> AttentionMetadata:
        return self._bend(self._clean.attach(md, where), where)


def bend_layer_kinds(model, bend: Bend) -> None:
    """This model instance only; every other model (and a clean engine) keeps its own LayerKinds."""
    model.layer_kinds = _BentLayerKinds(model.layer_kinds, bend)
