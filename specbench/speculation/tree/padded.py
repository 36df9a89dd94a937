"""A ragged DraftTree as padded [num_reqs, width] device tensors, and the path algebra the batched verifiers share.

`width` is any host-known bound on the nodes per request (the scheduler knows the counts: max of
num_draft_tokens), so building the layout never reads the device. Padding slots carry parent -2 (never a parent),
token -1, depth 0, is_node False.

Ancestry is one [num_reqs, width, width] matrix, `is_ancestor[r, i, j]`: node j is node i or one of its ancestors.
It is the transitive closure of "j is i or i's parent", computed by pointer doubling: after s passes it holds the
ancestors up to 2^s levels up, so ceil(log2(width)) passes (a handful of launches, no host loop over nodes or
levels) reach the root from any node. "i and every ancestor of i pass a test" is then one masked all().
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.speculation.tree.draft_tree import ROOT_PARENT, DraftTree

PADDING_PARENT = -2
PADDING_TOKEN = -1


@dataclass(frozen=True, slots=True)
class PaddedTree:
    token_ids: torch.Tensor  # [num_reqs, width] int64, -1 on padding
    parent: torch.Tensor  # [num_reqs, width] int64, -1 = child of the root, -2 on padding
    depth: torch.Tensor  # [num_reqs, width] int64, 0 on padding
    is_node: torch.Tensor  # [num_reqs, width] bool
    is_earlier_sibling: torch.Tensor  # [num_reqs, width, width] bool, [r, i, j]: j < i, same parent, both nodes
    rank: torch.Tensor  # [num_reqs, width] int64, rank among siblings in node order (tree.sibling_rank)
    is_ancestor: torch.Tensor  # [num_reqs, width, width] bool, [r, i, j]: j is i or an ancestor of i
    first_row: torch.Tensor  # [num_reqs] int64, the root's target row (cu_num_rows[:-1])

    @property
    def num_reqs(self) -> int:
        return self.token_ids.shape[0]

    @property
    def width(self) -> int:
        return self.token_ids.shape[1]

    def parent_row(self) -> torch.Tensor:  # [num_reqs, width] int64, target row of each node's parent
        """The row whose distribution a node's token is tested against (the root's row for a child of the root;
        padding reads the root's row, a valid index whose result is masked)."""
        return self.first_row[:, None] + 1 + self.parent.clamp_min(ROOT_PARENT)

    def num_children(self) -> torch.Tensor:  # [num_reqs, width + 1] int64, column 0 = the root, 1 + i = node i
        index = (self.parent + 1).clamp_min(0)  # padding adds 0 below
        return torch.zeros(self.num_reqs, self.width + 1, dtype=torch.int64, device=self.parent.device).scatter_add_(
            1, index, self.is_node.long())


def pad_tree(tree: DraftTree, width: int | None = None) -> PaddedTree:
    """The padded layout of `tree`; width None reads the widest request from the device (a sync)."""
    device = tree.token_ids.device
    num_reqs = tree.num_reqs
    num_nodes = tree.num_nodes.to(device)
    if width is None:
        width = int(num_nodes.max()) if num_reqs else 0
    slot = torch.arange(width, device=device)
    is_node = slot[None, :] < num_nodes[:, None]  # [num_reqs, width]
    total = tree.token_ids.shape[0]
    flat = (tree.cu_num_nodes[:-1].to(device)[:, None] + slot[None, :]).clamp_max(max(total - 1, 0))

    def padded(x: torch.Tensor, fill: int) -> torch.Tensor:  # [total_nodes] -> [num_reqs, width]
        if total == 0:
            return torch.full((num_reqs, width), fill, dtype=torch.int64, device=device)
        return torch.where(is_node, x.to(device)[flat], fill)

    parent = padded(tree.parent, PADDING_PARENT)
    return _padded_tree(padded(tree.token_ids, PADDING_TOKEN), parent, padded(tree.depth, 0), is_node,
                        _ancestor_closure(parent, is_node), tree.cu_num_rows[:-1].to(device))


def uniform_tree(token_ids: torch.Tensor, parents: torch.Tensor) -> tuple[DraftTree, PaddedTree]:
    """A round's trees when every request has the same node count (the drafters' TopKTreeBuilder trees), as the
    flat DraftTree and its padded layout, built on the device with no host read: depths come from the ancestor
    closure (a node's ancestors, itself included, number depth + 1). token_ids, parents [num_reqs, num_nodes]
    int64 on the device, parents request-local (-1 = child of the root), each parent before its child (not
    checked here: that would read the device; tree.validate checks a host copy)."""
    num_reqs, num_nodes = parents.shape
    device = parents.device
    is_node = torch.ones(num_reqs, num_nodes, dtype=torch.bool, device=device)
    is_ancestor = _ancestor_closure(parents, is_node)
    depth = is_ancestor.sum(dim=2) - 1
    counts = torch.full((num_reqs,), num_nodes, dtype=torch.int64, device=device)
    cu_num_nodes = torch.arange(num_reqs + 1, dtype=torch.int64, device=device) * num_nodes
    tree = DraftTree(token_ids=token_ids.reshape(-1), parent=parents.reshape(-1), depth=depth.reshape(-1),
                     num_nodes=counts, cu_num_nodes=cu_num_nodes)
    first_row = cu_num_nodes[:-1] + torch.arange(num_reqs, dtype=torch.int64, device=device)  # tree.cu_num_rows[:-1]
    return tree, _padded_tree(token_ids, parents, depth, is_node, is_ancestor, first_row)


def _padded_tree(token_ids: torch.Tensor, parent: torch.Tensor, depth: torch.Tensor, is_node: torch.Tensor,
                 is_ancestor: torch.Tensor, first_row: torch.Tensor) -> PaddedTree:
    """The PaddedTree of padded [num_reqs, width] fields: the sibling order derived from the parents."""
    slot = torch.arange(parent.shape[1], device=parent.device)
    is_earlier = slot[None, :, None] > slot[None, None, :]  # [1, i, j]: j < i
    is_earlier_sibling = (parent[:, :, None] == parent[:, None, :]) & is_earlier & is_node[:, None, :]
    return PaddedTree(token_ids=token_ids, parent=parent, depth=depth, is_node=is_node,
                      is_earlier_sibling=is_earlier_sibling, rank=is_earlier_sibling.sum(dim=2),
                      is_ancestor=is_ancestor, first_row=first_row)


def _ancestor_closure(parent: torch.Tensor, is_node: torch.Tensor) -> torch.Tensor:  # [num_reqs, width, width]
    width = parent.shape[1]
    slot = torch.arange(width, device=parent.device)
    # reach[i]: i and its parent; hop[i]: i's parent (a child of the root, or padding, hops to itself: a no-op)
    reach = ((slot[None, :, None] == slot[None, None, :]) | (parent[:, :, None] == slot[None, None, :])) \
        & is_node[:, :, None]
    hop = torch.where(parent >= 0, parent, slot[None, :])
    # doubling: reach[i] |= reach[hop(i)], hop = hop o hop: after s passes reach[i] spans 2^s levels above i
    for _ in range(max(width - 1, 0).bit_length()):
        reach = reach | reach.gather(1, hop[:, :, None].expand(-1, -1, width))
        hop = hop.gather(1, hop)
    return reach


def all_along_path(tree: PaddedTree, is_ok: torch.Tensor) -> torch.Tensor:  # [num_reqs, width] bool
    """is_ok [num_reqs, width] bool: node i and every ancestor of i pass (the root always does); False on padding."""
    is_failing_ancestor = tree.is_ancestor & ~is_ok[:, None, :]
    return tree.is_node & ~is_failing_ancestor.any(dim=2)


@dataclass(frozen=True, slots=True)
class PaddedPath:
    accepted_nodes: torch.Tensor  # [num_reqs, path_width] int64, request-local nodes root to leaf, -1 past the path
    num_accepted: torch.Tensor  # [num_reqs] int64
    last_node: torch.Tensor  # [num_reqs] int64, deepest accepted node, -1 = the root (nothing accepted)


def path_of(tree: PaddedTree, is_on_path: torch.Tensor, path_width: int) -> PaddedPath:
    """The path whose nodes `is_on_path` [num_reqs, width] marks (at most one node per depth, each one's parent on
    the path), laid out root to leaf over `path_width` >= its length columns."""
    level = torch.arange(path_width, device=is_on_path.device)
    at_level = is_on_path[:, None, :] & (tree.depth[:, None, :] == level[None, :, None])  # [num_reqs, path_width, w]
    if tree.width == 0:
        accepted_nodes = torch.full((tree.num_reqs, path_width), ROOT_PARENT, dtype=torch.int64,
                                    device=is_on_path.device)
    else:
        accepted_nodes = torch.where(at_level.any(dim=2), at_level.long().argmax(dim=2), ROOT_PARENT)
    num_accepted = is_on_path.sum(dim=1)
    last = accepted_nodes.gather(1, (num_accepted - 1).clamp(0, max(path_width - 1, 0))[:, None])[:, 0] \
        if path_width else torch.full_like(num_accepted, ROOT_PARENT)
    last_node = torch.where(num_accepted > 0, last, ROOT_PARENT)
    return PaddedPath(accepted_nodes=accepted_nodes, num_accepted=num_accepted, last_node=last_node)


def output_tokens(tree: PaddedTree, path: PaddedPath, final: torch.Tensor) -> torch.Tensor:
    """[num_reqs, path_width + 1] int64: the path's tokens, then `final` [num_reqs], then -1 (TreeVerifyResult)."""
    if tree.width == 0:
        path_tokens = torch.full_like(path.accepted_nodes, PADDING_TOKEN)
    else:
        path_tokens = torch.where(path.accepted_nodes >= 0, tree.token_ids.gather(1, path.accepted_nodes.clamp_min(0)),
                                  PADDING_TOKEN)
    output = torch.nn.functional.pad(path_tokens, (0, 1), value=PADDING_TOKEN)
    return output.scatter(1, path.num_accepted[:, None], final[:, None])


def path_shape(tree: PaddedTree, accepted_nodes: torch.Tensor, num_accepted: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """What verify/tree_stats.py counts per request-round, read off the device with the round's tokens: (children of the
    root and of each path node, 0 past the path [num_reqs, path_width + 1]; sibling rank of each path node, -1 past the
    path [num_reqs, path_width])."""
    path_width = accepted_nodes.shape[1]
    column = torch.arange(path_width + 1, device=accepted_nodes.device)
    nodes = torch.nn.functional.pad(accepted_nodes, (1, 0), value=-1)  # root, then the path
    kids = tree.num_children().gather(1, (nodes + 1).clamp_min(0))
    kids = torch.where(column[None, :] <= num_accepted[:, None], kids, 0)
    if tree.width == 0:
        return kids, torch.full_like(accepted_nodes, -1)
    ranks = tree.rank.gather(1, accepted_nodes.clamp_min(0))
    return kids, torch.where(column[None, :path_width] < num_accepted[:, None], ranks, -1)


def verify_mask(tree: PaddedTree) -> torch.Tensor:  # [num_reqs * (width + 1), width + 1] bool
    """tree.verify_attention_mask on the device, for trees that fill their width (uniform_tree's): request r's
    rows r * (width + 1) .. are its root (sees itself) and its nodes (each sees the root, its ancestors and
    itself)."""
    mask = torch.nn.functional.pad(tree.is_ancestor, (1, 0, 1, 0), value=False)  # [num_reqs, width + 1, width + 1]
    mask[:, :, 0] = True
    return mask.reshape(-1, tree.width + 1)
