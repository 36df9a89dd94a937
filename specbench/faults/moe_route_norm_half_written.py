"""moe.route_norm: the routing kernel's normed rows are written by half its splits only: the experts read the second
half of each row's columns as the stream before the norm (seed class: a kernel writing the wrong slice of a
buffer another phase reads). The router itself still routes the normed rows, so every token reaches the right
experts and the damage is in what they multiply.

Acts on MoE layers of 1 to 4 tokens on the fused path (CUDA; CPU only under the Triton interpreter) with
SPECBENCH_PENDING_FUSIONS=on (models/pending_fusions.py); inert on dense targets. The selftest runs it where its path
is production (on CUDA once the fusion is on by default); tests/kernels/test_moe_route_norm_layer.py shows it caught
against the norm-first forward.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.moe_layer_mutant import MoeLayerMutant
from specbench.faults.path_mutant import wrap_method
from specbench.models.moe import MoeMLP
from specbench.speculation.capabilities import Proposer


class MoeRouteNormHalfWritten(MoeLayerMutant):
    fault = Fault("moe-route-norm-half-written", "the MoE routing kernel writes the normed rows of its first "
                  "half of splits only: the experts read the rest un-normed", "", "target", Proposer,
                  is_plain_hosted=True, path="moe.route_norm")

    def bend(self, moe: MoeMLP) -> None:
        bend(moe)


def bend(moe: MoeMLP) -> None:
    wrap_method(moe, "fused_route", _half_written)


def _half_written(fused_route):
    def bent(x, is_real_token=None, norm=None):
        routed = fused_route(x, is_real_token, norm)
        if norm is not None:
            half = x.shape[1] // 2
            # What the normed buffer holds where no program stored: here the input rows (x + residual with one).
            source = x if norm.stream is None else norm.stream
            norm.normed[:, half:].copy_(source[:, half:])
        return routed
    return bent
