"""hybrid.triton_verify: the fused gated-delta-rule verify kernel keeps, at each position, the state from before that
position's token instead of after it (seed class: off by one, a store placed before the update it should follow).

The outputs stay right (the rule ran), only the kept states are one token late: the commit then gives each slot the
state one token short of its last accepted token, so the next step's output is computed from a state that never saw
that token. The bend shifts the kept recurrent states one position down each request's row (its slot's state at
position 0) after the fused call, with device ops only, so the target's CUDA graphs are captured again through it.
Acts only where the layers run --recurrent-kernels triton; inert on the torch and fla kernels and on targets without
Gated DeltaNet layers. tests/recurrent/test_triton_verify_engine.py catches it with the state oracle and greedy
identity.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, recapture_target_graphs, wrap_method
from specbench.recurrent.gated_delta_net import GatedDeltaNet
from specbench.recurrent.kernel_choice import TRITON
from specbench.speculation.capabilities import Proposer


class StateFusedKeptShifted(PathMutant):
    fault = Fault("state-fused-kept-shifted", "the fused gated-delta-rule verify kernel keeps each position's state "
                  "from before its token", "", "target", Proposer, is_plain_hosted=True,
                  path="hybrid.triton_verify", caught_by="greedy, state oracle")

    def install(self, engine) -> None:
        for module in engine.runner.model.modules():
            if isinstance(module, GatedDeltaNet) and module.recurrent_kernels == TRITON:
                wrap_method(module, "verify_fused", lambda fn, layer=module.state_layer: _kept_one_late(fn, layer))
        recapture_target_graphs(engine)


def _kept_one_late(verify_fused, state_layer: int):
    def bent(projections, core, kept_conv, kept_rec, states, rows) -> None:
        verify_fused(projections, core, kept_conv, kept_rec, states, rows)
        num_reqs = len(rows.slots)
        by_request = kept_rec.view(num_reqs, kept_rec.shape[0] // num_reqs, *kept_rec.shape[1:])
        by_request[:, 1:] = by_request[:, :-1].clone()
        by_request[:, 0] = states.recurrent[state_layer][rows.slot_tensor(core.device)]
    return bent
