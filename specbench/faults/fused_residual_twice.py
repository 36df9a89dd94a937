"""proj.fused: the fused down projection adds the residual twice to the last row of a multi-token batch (seed
class: off by one, here the tail row of the tensor-core tiles).

On the decode-batch path (models/decode_gemv.py) the residual adds happen inside the projections. Here, from two
tokens up (verify, batched decode), the last row's down projection adds the stream entering the MLP twice, so that
token's hidden state leaving the block is wrong. Only the fused path is bent: the eager layers stay correct.
"""

from __future__ import annotations

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import (
    PathMutant,
    recapture_target_graphs,
    wrap_method,
)
from specbench.speculation.capabilities import Proposer


class FusedResidualTwice(PathMutant):
    fault = Fault("fused-residual-twice", "the fused down projection adds the residual twice to a batch's last row",
                  "", "target", Proposer, path="proj.fused", is_plain_hosted=True)

    def install(self, engine) -> None:
        for layer in engine.runner.model.layers:
            wrap_method(layer, "forward", _twice_in_last_row)
        recapture_target_graphs(engine)


def _twice_in_last_row(forward):
    def bent(hidden, residual, cos_sin, kv_cache, md, backend):
        out = forward(hidden, residual, cos_sin, kv_cache, md, backend)
        # Only decode_gemv.block leaves no residual (it adds it in the projections): the eager path is untouched.
        if out.residual is not None or out.hidden.shape[0] < 2:
            return out
        stream = out.hidden.clone()
        stream[-1] += out.layer_input[-1]
        return type(out)(hidden=stream, residual=None, layer_input=out.layer_input)
    return bent
