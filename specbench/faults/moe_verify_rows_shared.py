"""moe.few_token_combine: within an expert's rows of a verify batch, a row takes the slot of the row before it, so
two tokens that chose the same expert share one token's activation and output: the first gets the expert's output
twice, the second none (seed class: a grouped kernel indexing its token tile by the expert's first row).

Acts on the "grouped" MoE kernel set's 2-16 token batches where two tokens share an expert (a verify's tokens
mostly do); inert under the default "gemv" set and on dense targets. tests/kernels/test_kernel_moe_grouped_set.py
shows it caught against the eager reference.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specbench.faults.fault import Fault
from specbench.faults.moe_layer_mutant import MoeLayerMutant
from specbench.faults.path_mutant import wrap_method
from specbench.models.moe import MoeMLP
from specbench.models.moe_routing import ExpertRouting
from specbench.speculation.capabilities import Proposer


class MoeVerifyRowsShared(MoeLayerMutant):
    fault = Fault("moe-verify-rows-shared", "in a few-token MoE batch an expert's rows are shared across two of its "
                  "tokens: one gets the expert's output twice, the other none", "", "target", Proposer,
                  is_plain_hosted=True, path="moe.few_token_combine")

    def bend(self, moe: MoeMLP) -> None:
        bend(moe)


def bend(moe: MoeMLP) -> None:
    wrap_method(moe, "few_token_experts", lambda method: _shared_rows(method, moe.config.num_experts))


def _shared_rows(few_token_experts, num_experts: int):
    def bent(x, routing: ExpertRouting, order=None):
        from specbench.kernels.moe_sort import sort_by_expert

        ids = routing.topk_ids.reshape(-1)  # [num_tokens * k]
        if order is None:
            order = sort_by_expert(routing.topk_ids, num_experts)
        slots = order.sorted_slots.long()  # [num_tokens * k] by expert
        previous = torch.cat([slots[:1], slots[:-1]])
        # Device ops only (graph-capturable): a row whose previous row holds the same expert takes that row's slot.
        is_shared = ids[slots] == ids[previous]
        bent_slots = torch.where(is_shared, previous, slots).to(order.sorted_slots.dtype)
        return few_token_experts(x, routing, replace(order, sorted_slots=bent_slots))
    return bent
