"""A tree draft step's mask lets a frontier node see the frontier node fed before it when both have the same parent
(its previous sibling): the drafter's law at that node mixes in a branch it does not continue, so its children (and
the frontier after it) change. The target still verifies whatever tree it is handed, so greedy output stays exact and
the sampled law too; only acceptance drops. The tree draft oracle (check/tree_oracle.py) sees it as a law mismatch
at the node; INV-TREE too, when debug invariants are on (the node sees one tree row more than its depth).

Bent from outside, on the device tree path users run (speculation/tree/device.py): the drafter's own forward (the
draft LM's model, the EAGLE / MTP head) gets the bent mask whenever its metadata is a tree draft step's (not the
verify layout); tree verifies, catch-ups and chain rounds are untouched. The bend is fixed-shape tensor ops on the
device mask (no host read), so it acts alike in an eager round (what the oracle records: a recorder makes tree rounds
draft eagerly) and in the tree draft graphs: those are captured after install (an engine starts drafting chains;
set_draft_shape captures a tree plan's graphs through the bent forward), so nothing captured bypasses it.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import wrap_method
from specbench.speculation.capabilities import DraftsTrees
from specbench.speculation.drafters.draft_model import DraftModelProposer


class TreeDraftSeesSibling(Mutant):
    fault = Fault("tree-draft-sees-sibling", "a tree draft step's mask lets a node see its previous sibling", "",
                  "draft", DraftsTrees)
    eager_drafting = False  # the production tree path: device steps, from the tree graphs where captured

    def install(self, engine) -> None:
        proposer = engine.proposer
        # tree draft graphs are captured for a tree shape only, later, through the bent forward (module doc)
        assert not engine.draft_shape.is_tree, "installed after a tree shape's draft graphs were captured"
        drafter = proposer.model if isinstance(proposer, DraftModelProposer) else proposer.head

        def make(forward):
            def bent(*args, **kwargs):
                args = tuple(_bend(a) if isinstance(a, AttentionMetadata) else a for a in args)
                return forward(*args, **kwargs)
            return bent

        wrap_method(drafter, "forward", make)


def _bend(md: AttentionMetadata) -> AttentionMetadata:
    """A tree draft step's metadata with each query also seeing the row before its own when that row's query has the
    same parent (every request feeds the same number of queries, its newest tree rows: tree/device.py)."""
    if md.tree is None or md.tree.is_verify:
        return md
    num_reqs, num_query = len(md.tree.num_tree_rows), md.max_query_len
    flat = md.tree.mask  # [num_reqs * num_query, num_rows]
    num_rows = flat.shape[1]
    assert flat.shape[0] == num_reqs * num_query, "a tree draft step feeds every request the same frontier width"
    mask = flat.view(num_reqs, num_query, num_rows)
    index = torch.arange(num_rows, device=flat.device)  # [rows]
    own_row = num_rows - num_query + torch.arange(num_query, device=flat.device)  # [Q] each query's own tree row
    before = mask & (index[None, None, :] < own_row[None, :, None])
    parent_row = (before * (index + 1)).amax(dim=-1) - 1  # [R, Q] the deepest row seen before its own, -1 = root
    is_sibling = parent_row[:, 1:] == parent_row[:, :-1]  # [R, Q - 1]: query q and q - 1 share their parent
    previous = index[None, :] == (own_row[1:] - 1)[:, None]  # [Q - 1, rows]: the row fed before query q's
    bent = mask.clone()
    bent[:, 1:] |= is_sibling[..., None] & previous[None]
    bent = bent.view(num_reqs * num_query, num_rows)
    # host copy only where the step carries one (host reference, debug read-back: INV-TREE reads it); a graph's or a
    # plain eager device step's is empty and stays so (no sync)
    mask_cpu = bent.cpu() if md.tree.mask_cpu.shape[0] else md.tree.mask_cpu
    tree = dataclasses.replace(md.tree, mask=bent, mask_cpu=mask_cpu, packed=None)
    return dataclasses.replace(md, tree=tree)
