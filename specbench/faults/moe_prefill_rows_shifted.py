"""moe.prefill_grouped: the grouped GEMM's rows are one off the sort (each row computes the slot of the row before
it), so at every expert's first row a token's slot is computed with the wrong expert's weights (seed class: an
off-by-one in the tile map of a grouped GEMM).

Acts on the uncaptured batches past 64 tokens (prefills) of the "auto" (default) and "grouped" MoE kernel sets;
inert under "gemv", on short prompts and on dense targets. The CUDA selftest runs it on its window + MoE target;
tests/kernels/test_kernel_moe_grouped_set.py shows it caught against the eager reference.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.faults.fault import Fault
from specbench.faults.moe_layer_mutant import MoeLayerMutant
from specbench.faults.path_mutant import wrap_method
from specbench.models.moe import MoeMLP
from specbench.speculation.capabilities import Proposer


class MoePrefillRowsShifted(MoeLayerMutant):
    fault = Fault("moe-prefill-rows-shifted", "the MoE prefill grouped GEMM computes each sorted row with the slot of "
                  "the row before it: expert boundaries mix experts", "", "target", Proposer, is_plain_hosted=True,
                  path="moe.prefill_grouped")

    is_captured = False

    def bend(self, moe: MoeMLP) -> None:
        bend(moe)


def bend(moe: MoeMLP) -> None:
    wrap_method(moe, "prefill_experts", _shifted)


def _shifted(prefill_experts):
    def bent(x, routing, sort=None):
        from specbench.kernels.moe_prefill import prefill_sort

        def shifted_sort(topk_ids, num_experts):
            order = (sort or prefill_sort)(topk_ids, num_experts)
            return replace(order, sorted_slots=order.sorted_slots.roll(1))
        return prefill_experts(x, routing, sort=shifted_sort)
    return bent
