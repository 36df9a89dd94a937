"""A node's parent index off by one in the tree verify input: a node whose parent is a draft node is attached, in the
verify mask, to the node before its parent (its ancestors become that node's, plus itself), while the verifier walks
the true tree. A node is verified in another branch's context.

Tree verifies only. Greedy output departs from the plain reference once such a node decides the path or the bonus;
INV-TREE raises where the shifted parent has another depth (the node then sees a wrong number of tree rows).
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.faults.tree_bend import bend_tree_verify_mask, parent_rows
from specbench.speculation.capabilities import DraftsTrees


class TreeParentOffByOne(Mutant):
    fault = Fault("tree-parent-off-by-one", "a node's parent index off by one in the tree verify input (mask)", "",
                  "target", DraftsTrees)
    eager_drafting = False

    def install(self, engine) -> None:
        bend_tree_verify_mask(engine, _parent_shifted)


def _parent_shifted(block: torch.Tensor) -> torch.Tensor:
    clean = block.clone()
    for i, parent in enumerate(parent_rows(clean)):
        if parent >= 1:  # the parent is a draft node: take the row before it
            block[i] = clean[parent - 1]
            block[i, i] = True
    return block
