"""graph.verify on a MoE target: the experts' padding mask is baked into the CUDA graph when it is captured, instead
of being read from the replayed batch's slot mapping (seed class: expert routing of padded graph rows leaking into
real rows).

A MoE layer routes each row of a verify (or decode) batch to its top-k experts; rows of padding requests (slot -1,
runtime/cuda_graph.py) are routed to no expert (models/moe_routing.py), so what a padded row holds can wake no
expert and reach no real row. The graph is captured on a batch of padding requests only (cuda_graph.py: warm-up and
capture never write real KV), so a mask frozen at capture says "padding" for every row: at each replay the real
rows route like padding rows, to no expert, and lose their routed output (the shared residual stream carries on).
Eager forwards (prefill, the CPU, batches past the graphs) compute the mask from the live slot mapping and stay
right. The output changes from the first verified round on: greedy and sampled checks catch it against the eager
reference. It cannot act off CUDA (no graphs) or on a dense target (no experts): inert on the seeds' targets.
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import (
    PathMutant,
    recapture_target_graphs,
    wrap_method,
)
from specbench.models.moe import MoeMLP
from specbench.models.moe_forward import is_capturing
from specbench.speculation.capabilities import Proposer


class MoePaddingMaskFrozenAtCapture(PathMutant):
    fault = Fault("moe-padding-mask-frozen-at-capture", "MoE layers in a CUDA graph keep the padding mask of the "
                  "batch they were captured on (all padding): replayed real rows route to no expert",
                  "", "target", Proposer, is_plain_hosted=True, path="graph.verify")

    def install(self, engine) -> None:
        for module in engine.runner.model.modules():
            if isinstance(module, MoeMLP):
                wrap_method(module, "forward", _frozen_mask)
        recapture_target_graphs(engine)


def _frozen_mask(forward):
    def bent(x: torch.Tensor, is_real_token: torch.Tensor | None = None, *, is_fused: bool = False,
             norm=None) -> torch.Tensor:
        if is_real_token is not None and is_capturing(x):
            # The capture batch's mask, a constant of the graph: every row of it is a padding request's.
            is_real_token = torch.zeros_like(is_real_token)
        return forward(x, is_real_token, is_fused=is_fused, norm=norm)
    return bent
