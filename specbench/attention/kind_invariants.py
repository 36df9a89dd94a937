"""INV-KIND (debug invariant): each layer's kind metadata against what the model declares and an independent
recomputation.

Every layer's metadata must have been built by the layer's declared kind (a windowed layer running without its
window, or on another layer's, fails here); then each kind checks its own metadata (`AttentionKind.check`: a window's
first visible keys from the requests' lengths, catching a window carried over from another forward or off by one).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specbench.attention.invariant_violation import InvariantViolation
from specbench.attention.kinds import AttentionKind
from specbench.attention.metadata import AttentionMetadata


def check_layer_kinds(md: AttentionMetadata, kinds: Sequence[AttentionKind], where: str = "") -> None:
    if all(kind.is_full for kind in kinds):
        return
    if len(md.layer_kinds) != len(kinds):
        raise InvariantViolation(f"{where}: INV-KIND violated: metadata has kinds for {len(md.layer_kinds)} layers, "
                                 f"the model declares {len(kinds)} (a windowed layer would run without its window)")
    if md.positions.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    checked: set[tuple[AttentionKind, int]] = set()  # (kind, id of its metadata): layers of one kind share one
    for layer, kind in enumerate(kinds):
        built = md.layer_kinds[layer]
        if built.kind != kind:
            raise InvariantViolation(f"{where}: INV-KIND violated: layer {layer} is declared {kind}, its metadata is "
                                     f"{type(built).__name__} built by {built.kind}")
        if (kind, id(built)) not in checked:
            checked.add((kind, id(built)))
            kind.check(built, md, layer, where)
