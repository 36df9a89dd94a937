"""A path mutant that bends every MoE layer of the target (`bend(moe)`), then recaptures the target's CUDA graphs
where the bent path is captured (a graph replays the kernels it recorded, not the wrapped method)."""

from __future__ import annotations

from specbench.faults.path_mutant import PathMutant, recapture_target_graphs
from specbench.models.moe import MoeMLP


class MoeLayerMutant(PathMutant):
    is_captured = True  # False: the bent path never runs inside a graph (prefills past the capture sizes)

    def bend(self, moe: MoeMLP) -> None:
        raise NotImplementedError

    def install(self, engine) -> None:
        for module in engine.runner.model.modules():
            if isinstance(module, MoeMLP):
                self.bend(module)
        if self.is_captured:
            recapture_target_graphs(engine)
