"""hybrid.gated_attention_fused: the fused q/k kernel of a hybrid target's gated attention stores each token's K and V
at the slot of the batch row before it (seed class: the wrong KV slice: a slot mapping indexed one row off).

At one token a forward (plain decode at concurrency 1) the rotation is the identity and nothing changes; from two
(verify rounds, batched decode, short prefills) keys land at other positions or in other requests' blocks, and
attention reads them. Acts on the fused path only (CUDA; CPU under the Triton interpreter with fused kernels on; both
with SPECBENCH_PENDING_FUSIONS=on until a GPU run, models/pending_fusions.py);
inert on the eager layers and on targets without gated attention. tests/models/test_gated_attention_fused.py
catches it against the eager engine.
"""

from __future__ import annotations

import dataclasses

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, recapture_target_graphs, wrap_method
from specbench.speculation.capabilities import Proposer


class GatedAttentionKvSlotShift(PathMutant):
    fault = Fault("gated-attention-kv-slot-shift", "the fused gated-attention q/k kernel stores each token's K/V at "
                  "the previous batch row's slot", "", "target", Proposer, is_plain_hosted=True,
                  path="hybrid.gated_attention_fused")

    def install(self, engine) -> None:
        from specbench.models.qwen3_next import GatedSelfAttention

        for module in engine.runner.model.modules():
            if isinstance(module, GatedSelfAttention):
                wrap_method(module, "fused_qk_store", _slots_one_row_late)
        recapture_target_graphs(engine)


def _slots_one_row_late(fused_qk_store):
    def bent(qkv, cos_sin, kv_cache, md):
        return fused_qk_store(qkv, cos_sin, kv_cache, dataclasses.replace(md, slot_mapping=md.slot_mapping.roll(1)))
    return bent
