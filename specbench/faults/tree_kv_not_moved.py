"""The accepted path's target KV is not compacted into place after a tree verify: the path's positions keep the
tree rows stored there in node order (the first nodes', of whatever branch), and the next rounds attend to them.

Bent from outside: the target KV as the tree verify wrote it is kept, and put back just before the proposer is told
the accepted paths (engine/tree_round.py runs the compaction in between). Chain rounds are untouched. Greedy output
departs from the plain reference once an accepted path is not the first nodes in node order (seed 003's bug in tree
form).
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.faults.tree_bend import is_tree_verify
from specbench.speculation.capabilities import DraftsTrees


class TreeKvNotMoved(Mutant):
    fault = Fault("tree-kv-not-moved", "the accepted path's target KV not compacted into place after a tree verify",
                  "", "target", DraftsTrees)
    eager_drafting = False

    def install(self, engine) -> None:
        kv = engine.runner.kv_cache
        written: list = []  # per layer (K, V) as the last tree verify left them

        def keep(verify):
            def kept(inp):
                out = verify(inp)
                if is_tree_verify(inp):
                    written[:] = [tuple(t.clone() for t in kv.flat(layer)) for layer in range(len(kv.k))]
                return out
            return kept

        def undo(on_tree_verified):
            def undone(request_ids, accepted_nodes):
                for layer, saved in enumerate(written):
                    for now, before in zip(kv.flat(layer), saved):
                        now.copy_(before)
                written.clear()
                return on_tree_verified(request_ids, accepted_nodes)
            return undone

        wrap_method(engine.runner, "verify", keep)
        wrap_method(engine.proposer, "on_tree_verified", undo)
