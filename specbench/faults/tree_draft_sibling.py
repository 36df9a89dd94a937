"""A tree draft step's mask lets a frontier node see the frontier node fed before it when both have the same parent
(its previous sibling): the drafter's law at that node mixes in a branch it does not continue, so its children (and
the frontier after it) change. The target still verifies whatever tree it is handed, so greedy output stays exact and
the sampled law too; only acceptance drops. The tree draft oracle (check/tree_oracle.py) sees it as a law mismatch
at the node; INV-TREE too, when debug invariants are on (the node sees one tree row more than its depth).

Bent from outside: the drafter's own forward (the draft LM's model, the EAGLE / MTP head) gets the bent mask whenever
its metadata is a tree draft step's (not the verify layout); tree verifies, catch-ups and chain rounds are untouched.
Tree draft steps run eagerly (no CUDA graph captured through the clean forward to bypass this one).
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.attention.tree_mask import tree_query_rows
from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import DraftsTrees
from specbench.speculation.draft_model import DraftModelProposer


class TreeDraftSeesSibling(Mutant):
    fault = Fault("tree-draft-sees-sibling", "a tree draft step's mask lets a node see its previous sibling", "",
                  "draft", DraftsTrees)
    eager_drafting = False  # tree rounds draft eagerly anyway

    def install(self, engine) -> None:
        proposer = engine.proposer
        drafter = proposer.model if isinstance(proposer, DraftModelProposer) else proposer.head

        def make(forward):
            def bent(*args, **kwargs):
                args = tuple(_bend(a) if isinstance(a, AttentionMetadata) else a for a in args)
                return forward(*args, **kwargs)
            return bent

        wrap_method(drafter, "forward", make)


def _bend(md: AttentionMetadata) -> AttentionMetadata:
    if md.tree is None or md.tree.is_verify:
        return md
    mask = md.tree.mask_cpu.clone()
    cu = md.query_start_loc_cpu
    for r in range(md.num_reqs):
        first, _ = tree_query_rows(md, r)
        for j in range(1, cu[r + 1] - cu[r]):
            t, row = cu[r] + j, first + j
            if _parent_row(mask[t], row) == _parent_row(mask[t - 1], row - 1):
                mask[t, row - 1] = True
    tree = dataclasses.replace(md.tree, mask=mask.to(md.tree.mask.device), mask_cpu=mask, packed=None)
    return dataclasses.replace(md, tree=tree)


def _parent_row(sees: torch.Tensor, row: int) -> int:
    """The deepest tree row a row sees before itself (its parent's; -1: the root, no tree row)."""
    before = torch.nonzero(sees[:row]).flatten().tolist()
    return max(before) if before else -1
