"""moe.few_token_combine: the down kernel's combine weighs each expert's output with another slot's routing weight
(each token's k weights rotated by one slot): every token still reaches the right experts, with the wrong weights
in the sum (seed class: an epilogue indexing the routing weights by sorted row instead of by slot).

Acts on the "grouped" MoE kernel set's 2-16 token batches only (verify rounds, decode at concurrency 2-16); inert
under the default "gemv" set and on dense targets. tests/kernels/test_kernel_moe_grouped_set.py shows it caught
against the eager reference (models/moe.py reference_experts).
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.moe_layer_mutant import MoeLayerMutant
from specbench.faults.path_mutant import wrap_method
from specbench.models.moe import MoeMLP
from specbench.models.moe_routing import ExpertRouting
from specbench.speculation.capabilities import Proposer


class MoeCombineWeightSwapped(MoeLayerMutant):
    fault = Fault("moe-combine-weight-swapped", "the few-token MoE down kernel's combine weighs each expert's output "
                  "with a neighbouring slot's routing weight", "", "target", Proposer, is_plain_hosted=True,
                  path="moe.few_token_combine")

    def bend(self, moe: MoeMLP) -> None:
        bend(moe)


def bend(moe: MoeMLP) -> None:
    wrap_method(moe, "few_token_experts", _swapped_weights)


def _swapped_weights(few_token_experts):
    def bent(x, routing: ExpertRouting, order=None):
        # [num_tokens, k]: slot j gets slot j - 1's weight; the experts (and so the sort) unchanged.
        weights = routing.topk_weights.roll(1, dims=1)
        return few_token_experts(x, ExpertRouting(routing.topk_ids, weights), order)
    return bent
