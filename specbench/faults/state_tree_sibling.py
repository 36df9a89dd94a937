"""A hybrid target's tree verify continues a node's recurrent and conv state from the row before its parent's (the
parent's earlier sibling or cousin, or the root) instead of from its parent: the node is verified after another
branch's tokens, the way a tree verify that ran its rows as one chain (or kept one state per depth) would.

Tree rounds on hybrid targets only; a child of the root is unaffected (its parent is the root), so only rounds whose
accepted path reaches depth 2 show it: the logits there are computed from the wrong state, and the slot takes that
wrong state (greedy identity with HF transformers, INV-STATE). Not the row before the node itself: the verify runs a
whole level at once (recurrent/tree_verify.py), so that row is often on the node's own level, not computed yet.
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import DraftsTrees


class StateTreeSibling(Mutant):
    fault = Fault("state-tree-sibling", "a hybrid target's tree verify continues a node's state from the row before "
                  "its parent's (a sibling branch) instead of its parent's", "", "target", DraftsTrees,
                  caught_by="greedy, state oracle")

    def state_tree_parents(self, parent_rows: torch.Tensor) -> torch.Tensor:
        # a row whose parent is a node (not a root, whose own parent is -1) takes the row before that parent
        is_node_parent = (parent_rows >= 0) & (parent_rows[parent_rows.clamp_min(0)] >= 0)
        return torch.where(is_node_parent, parent_rows - 1, parent_rows)
