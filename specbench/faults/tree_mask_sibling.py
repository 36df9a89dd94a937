"""The tree verify's mask lets a node see its previous sibling (a mask built per depth level, or a causal mask within
a level, instead of ancestors only): the node's logits mix in a branch it does not continue.

Tree verifies only; chain rounds are untouched. Greedy output departs from the plain reference whenever a node that
sees a sibling decides the accepted path or the bonus; INV-TREE raises at the first such verify (the node sees one
more tree row than its depth).
"""

from __future__ import annotations

import torch

from specbench.faults.fault import Fault, Mutant
from specbench.faults.tree_bend import bend_tree_verify_mask, parent_rows
from specbench.speculation.capabilities import DraftsTrees


class TreeMaskSeesSibling(Mutant):
    fault = Fault("tree-mask-sees-sibling", "the tree verify mask lets a node see its previous sibling", "", "target",
                  DraftsTrees)
    eager_drafting = False  # a verify-side bug: drafting as production runs it

    def install(self, engine) -> None:
        bend_tree_verify_mask(engine, _sees_previous_sibling)


def _sees_previous_sibling(block: torch.Tensor) -> torch.Tensor:
    parents = parent_rows(block)
    for i in range(2, block.shape[0]):
        if parents[i] == parents[i - 1]:
            block[i, i - 1] = True
    return block
