"""eagle.round_graph: the whole-round graph's feature buffer is filled on a bucket's first replay only (seed
class: stale state reused across phases).

A replayed graph reads its static buffers: every round must copy its target features into them. Here the copy is
skipped after a bucket's first replay, so later rounds draft from the features of that first round (the ids and
metadata buffers are refreshed). Outputs stay lossless; acceptance drops.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, wrap_method
from specbench.speculation.drafters.eagle.proposer import EagleProposer


class RoundGraphStaleFeatures(PathMutant):
    fault = Fault("round-graph-stale-features", "a whole-round graph's feature buffer is refreshed on its first "
                  "replay only", "002 (stale state reused)", "draft", EagleProposer, path="eagle.round_graph")

    def __init__(self) -> None:
        self._filled: set[tuple[int, int]] = set()  # (id of round graphs, bucket) whose features were loaded once
        self._wrapped: set[int] = set()  # ids of the round graphs whose run is bent

    def install(self, engine) -> None:
        proposer = engine.proposer

        def make(propose):
            def bending_propose(inp):
                # Whole-round graphs are captured after the engine is built (and per k): bend each on first sight.
                for graphs in proposer.round_graphs.values():
                    if id(graphs) not in self._wrapped:
                        self._wrapped.add(id(graphs))
                        wrap_method(graphs, "run", lambda run, graphs=graphs: self._stale_run(graphs, run))
                return propose(inp)
            return bending_propose

        wrap_method(proposer, "propose", make)

    def _stale_run(self, graphs, run):
        def stale(inp):
            key = (id(graphs), graphs.bucket_for(inp.extend_md.num_reqs))
            if key in self._filled:  # no feature row is copied into the graph's buffer
                inp = replace(inp, new_features=inp.new_features[:0], real_rows=inp.real_rows[:0])
            self._filled.add(key)
            return run(inp)
        return stale
