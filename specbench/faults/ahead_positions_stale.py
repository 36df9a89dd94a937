"""eagle.ahead: a round drafted ahead keeps the previous round's positions (seed classes: metadata not rebuilt
between steps, off-by-one positions).

The round drafted on the device from a verify the host has not read must start where that verify's newest token
sits. Here the device build reuses the newest positions of the round drafted ahead before it: they are never
advanced by what that round's verify accepted, so the catch-up writes draft KV at stale positions and drafts from
a shifted context. Outputs stay lossless (the verifier rejects bad drafts); acceptance drops.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, wrap_method
from specbench.speculation.drafters.eagle.proposer import EagleProposer


class AheadPositionsStale(PathMutant):
    fault = Fault("ahead-positions-stale", "a round drafted ahead reuses the previous ahead round's newest positions",
                  "004 (metadata not rebuilt)", "draft", EagleProposer, path="eagle.ahead")

    def __init__(self) -> None:
        self._previous: torch.Tensor | None = None  # [num_reqs] int64 device: the last ahead round's newest positions
        self._wrapped: set[int] = set()  # ids of the round graphs whose run_ahead is bent

    def install(self, engine) -> None:
        proposer = engine.proposer

        def make(propose_ahead):
            def bending_propose_ahead(*args, **kwargs):
                # Whole-round graphs are captured after the engine is built (and per k): bend each on first sight.
                for graphs in proposer.round_graphs.values():
                    if id(graphs) not in self._wrapped:
                        self._wrapped.add(id(graphs))
                        wrap_method(graphs, "run_ahead", self._stale_run_ahead)
                return propose_ahead(*args, **kwargs)
            return bending_propose_ahead

        wrap_method(proposer, "propose_ahead", make)

    def _stale_run_ahead(self, run_ahead):
        def stale(inp):
            real = inp.newest_positions
            if self._previous is not None and self._previous.shape == real.shape:
                inp = replace(inp, newest_positions=self._previous)
            self._previous = real
            return run_ahead(inp)
        return stale
