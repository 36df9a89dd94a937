"""The bonus token of a tree round is taken from the wrong node's row: the parent of the deepest accepted node (the
root's row when only one node is accepted), i.e. the row that accepted that node, not the row after it. Under greedy
decoding the bonus then repeats the deepest accepted token.

Bent from outside: the tree verify's logits are kept, the accepted paths read where the proposer is told them, and
the round's last committed token replaced by the argmax of that parent's row before the committer sees it. Rounds that
accept no node (bonus from the root, correct) and chain rounds are untouched. Greedy output departs from the plain
reference at the first round that accepts a node.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.faults.tree_bend import is_tree_verify
from specbench.speculation.capabilities import DraftsTrees


class TreeBonusWrongNode(Mutant):
    fault = Fault("tree-bonus-wrong-node", "the tree round's bonus token taken from the parent of the deepest "
                  "accepted node's row", "", "target", DraftsTrees)
    eager_drafting = False

    def install(self, engine) -> None:
        seen: dict = {}  # the last tree verify: its logits and query offsets; then the round's accepted paths

        def keep(verify):
            def kept(inp):
                out = verify(inp)
                if is_tree_verify(inp):
                    seen.update(logits=out.logits, first_row=list(inp.md.query_start_loc_cpu), paths=None)
                return out
            return kept

        def read(on_tree_verified):
            def reading(request_ids, accepted_nodes):
                seen["paths"] = accepted_nodes
                return on_tree_verified(request_ids, accepted_nodes)
            return reading

        def bend(commit_all):
            def bent(requests, committed, *args, **kwargs):
                if seen.get("paths") is not None:
                    committed = [_from_parent(c, path, seen["logits"], seen["first_row"][r])
                                 for r, (c, path) in enumerate(zip(committed, seen["paths"]))]
                    seen.clear()
                return commit_all(requests, committed, *args, **kwargs)
            return bent

        wrap_method(engine.runner, "verify", keep)
        wrap_method(engine.proposer, "on_tree_verified", read)
        wrap_method(engine.committer, "commit_all", bend)


def _from_parent(committed: list[int], path: tuple[int, ...], logits, first_row: int) -> list[int]:
    """Request's committed tokens with the bonus from the row of the deepest accepted node's parent (root row:
    first_row; node n's: first_row + 1 + n)."""
    if not path:
        return committed
    parent_row = first_row if len(path) == 1 else first_row + 1 + path[-2]
    return [*committed[:-1], int(logits[parent_row].argmax())]
