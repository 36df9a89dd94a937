"""hybrid.gated_attention_fused: the output projection's prologue gates each attention head with the next head's
gate (seed class: a strided read one block off, as a gate offset counted in the wrong unit).

Every token is hit (decode at concurrency 1 too): the layer's output is wrong wherever two heads' gates differ. Acts
on the fused path only (CUDA; CPU under the Triton interpreter with fused kernels on; both with
SPECBENCH_PENDING_FUSIONS=on until a GPU run, models/pending_fusions.py); inert on the eager layers and
on targets without gated attention. tests/models/test_gated_attention_fused.py catches it against the eager engine.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, recapture_target_graphs, wrap_method
from specbench.speculation.capabilities import Proposer


class GatedAttentionGateShift(PathMutant):
    fault = Fault("gated-attention-gate-shift", "the fused gated-attention o_proj gates each head with the next "
                  "head's gate", "", "target", Proposer, is_plain_hosted=True, path="hybrid.gated_attention_fused")

    def install(self, engine) -> None:
        from specbench.models.qwen3_next import GatedSelfAttention

        for module in engine.runner.model.modules():
            if isinstance(module, GatedSelfAttention):
                wrap_method(module, "gated_output",
                            lambda fn, layer=module: _next_heads_gate(fn, layer.num_heads, layer.head_dim))
        recapture_target_graphs(engine)


def _next_heads_gate(gated_output, num_heads: int, head_dim: int):
    def bent(attn_out, qkv):
        shifted = qkv.clone()
        q_gate = shifted[:, : 2 * num_heads * head_dim].view(-1, num_heads, 2 * head_dim)
        q_gate[..., head_dim:] = q_gate[..., head_dim:].roll(-1, dims=1)  # head h's gate <- head h + 1's
        return gated_output(attn_out, shifted)
    return bent
