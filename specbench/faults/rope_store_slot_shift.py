"""proj.rope_store: the fused qkv projection stores k and v one slot past each token's own (seed class: wrong KV
slice).

On the decode-batch path the qkv projection's epilogue rotates k and writes k and v into the paged cache
(kernels/gemv_rope.py), and attention then reads the cache. Here the epilogue's slot index is one too far: each
token's K/V lands in its neighbour's slot (wrapping at the end of the pool), so attention reads the previous
token's K/V at each position and stale or foreign K/V at block starts. The host's metadata copy (what the
debug invariants compare) stays right: only the slots the kernel is handed move.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specbench.attention.metadata import PADDING_SLOT
from specbench.faults.fault import Fault
from specbench.faults.path_mutant import (
    PathMutant,
    recapture_target_graphs,
    wrap_method,
)
from specbench.models import decode_gemv, fused_kernels
from specbench.speculation.capabilities import Proposer


class RopeStoreSlotShift(PathMutant):
    fault = Fault("rope-store-slot-shift", "the fused qkv + RoPE + K/V store writes each token's K/V one slot on",
                  "001 (wrong KV slice)", "target", Proposer, path="proj.rope_store", is_plain_hosted=True)

    def install(self, engine) -> None:
        for layer in engine.runner.model.layers:
            wrap_method(layer, "forward", lambda forward, layer=layer: _shifted_store(layer, forward))
        recapture_target_graphs(engine)


def _takes_rope_store(layer, hidden: torch.Tensor) -> bool:
    """The branch of decode_gemv.block that stores K/V in the projection."""
    attn = layer.self_attn
    return (decode_gemv.applies(layer, hidden) and attn.q_norm is None
            and fused_kernels.rope_store_fits(hidden.shape[0], attn.head_dim))


def _shifted_store(layer, forward):
    def bent(hidden, residual, cos_sin, kv_cache, md, backend):
        if _takes_rope_store(layer, hidden):
            num_slots = kv_cache.k[layer.self_attn.layer_idx].shape[0] * md.block_size
            slots = md.slot_mapping
            md = replace(md, slot_mapping=torch.where(slots == PADDING_SLOT, slots, (slots + 1) % num_slots))
        return forward(hidden, residual, cos_sin, kv_cache, md, backend)
    return bent
