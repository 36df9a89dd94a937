"""Bending a built engine's tree rounds from outside (the tree mutants' tools): the verify input's tree mask, and a
look at each tree verify's output.

`bend_tree_verify_mask` wraps that engine's target runner's `verify`: a tree verify's per-request mask block
([root + nodes, root + nodes] bool, row i = query i, column j = tree row j) is replaced by `bend(block)` before the
forward; positions and slots stay the clean ones, so INV-TREE (attention/tree_mask.py) still compares the bent mask
against them. Chain verifies and tree draft steps (not verify layout) pass untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from specbench.attention.tree_mask import is_verify_layout
from specbench.faults.path_mutant import wrap_method
from specbench.runtime.phases import VerifyInput

MaskBend = Callable[[torch.Tensor], torch.Tensor]  # [n, n] bool, one request's root + nodes -> bent


def is_tree_verify(inp: VerifyInput) -> bool:
    return inp.md.tree is not None and is_verify_layout(inp.md)


def bend_tree_verify_mask(engine, bend: MaskBend) -> None:
    def make(verify):
        def bent(inp: VerifyInput):
            if not is_tree_verify(inp):
                return verify(inp)
            md, tree = inp.md, inp.md.tree
            mask = tree.mask.cpu()  # the device mask: a tree laid out on the device has no host copy unless debug
            cu = md.query_start_loc_cpu
            for r in range(md.num_reqs):
                a, b = int(cu[r]), int(cu[r + 1])
                mask[a:b, : b - a] = bend(mask[a:b, : b - a].clone())
            mask_cpu = mask if tree.mask_cpu.shape[0] else tree.mask_cpu  # INV-TREE sees the bent mask where it looks
            bent_tree = dataclasses.replace(tree, mask=mask.to(tree.mask.device), mask_cpu=mask_cpu, packed=None)
            return verify(dataclasses.replace(inp, md=dataclasses.replace(md, tree=bent_tree)))
        return bent

    wrap_method(engine.runner, "verify", make)


def parent_rows(block: torch.Tensor) -> list[int]:
    """[n] per tree row its parent's row (-1 for the root): its deepest ancestor, i.e. the highest row it sees before
    itself (a node's ancestors precede it in node order)."""
    parents = [-1]
    for i in range(1, block.shape[0]):
        seen = torch.nonzero(block[i, :i]).flatten().tolist()
        parents.append(max(seen) if seen else -1)
    return parents
