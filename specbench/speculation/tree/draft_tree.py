"""Tree-shaped drafts: draft tokens with a parent per token, flattened over a ragged batch.

Layout of one verify forward for a tree: each request feeds its *root* (the last committed token, whose KV is
not cached yet, as in chain verification) followed by its draft nodes, so a request owns 1 + num_nodes rows;
row 0 is the root and row 1 + i is node i. Node i's parent is a request-local node index, or -1 for a child of
the root. Depth counts from 0 for the root's children, so node i sits at position num_committed + depth[i]
(num_committed counts every committed token, the root included; the root sits at num_committed - 1).
A chain of k drafts is the tree parent[i] = i - 1, depth[i] = i.

Invariant (checked by `validate`): a parent precedes its children (parent[i] < i), so a walk in index order
meets every node after its ancestors, and depth[i] = depth[parent[i]] + 1.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from specbench.device_copy import tensor_to_device
from specbench.errors import SpecbenchError

ROOT_PARENT = -1


class TreeShapeError(SpecbenchError):
    """A draft tree whose parents, depths or counts disagree."""


@dataclass(frozen=True, slots=True)
class DraftTree:
    token_ids: torch.Tensor  # [total_nodes] int64, draft token of each node
    parent: torch.Tensor  # [total_nodes] int64, request-local parent node index, -1 = child of the root
    depth: torch.Tensor  # [total_nodes] int64, 0 for a child of the root
    num_nodes: torch.Tensor  # [num_reqs] int64, draft nodes per request (may be 0)
    cu_num_nodes: torch.Tensor  # [num_reqs + 1] int64, prefix sums of num_nodes; request r owns cu[r]..cu[r+1]

    @property
    def num_reqs(self) -> int:
        return self.num_nodes.shape[0]

    @property
    def cu_num_rows(self) -> torch.Tensor:  # [num_reqs + 1] int64, prefix sums of 1 + num_nodes (root + nodes)
        return self.cu_num_nodes + torch.arange(self.num_reqs + 1, device=self.cu_num_nodes.device)

    def request_slice(self, req: int) -> slice:
        return slice(int(self.cu_num_nodes[req]), int(self.cu_num_nodes[req + 1]))

    def parents_of(self, req: int) -> list[int]:
        return self.parent[self.request_slice(req)].tolist()

    def tokens_of(self, req: int) -> list[int]:
        return self.token_ids[self.request_slice(req)].tolist()


def tree_from_parents(
    token_ids: list[list[int]],  # [num_reqs][num_nodes of the request]
    parents: list[list[int]],  # [num_reqs][num_nodes of the request], -1 = child of the root
    device: torch.device | str = "cpu",
) -> DraftTree:
    """A validated tree from per-request lists; depths are derived from the parents."""
    if len(token_ids) != len(parents) or any(len(t) != len(p) for t, p in zip(token_ids, parents)):
        raise TreeShapeError("token_ids and parents must have the same per-request lengths")
    depths: list[int] = []
    for req, request_parents in enumerate(parents):
        request_depths: list[int] = []
        for i, parent in enumerate(request_parents):
            _check_parent(req, i, parent)
            request_depths.append(0 if parent == ROOT_PARENT else request_depths[parent] + 1)
        depths += request_depths
    num_nodes = torch.tensor([len(p) for p in parents], dtype=torch.int64)
    tree = DraftTree(
        token_ids=torch.tensor([t for request in token_ids for t in request], dtype=torch.int64),
        parent=torch.tensor([p for request in parents for p in request], dtype=torch.int64),
        depth=torch.tensor(depths, dtype=torch.int64),
        num_nodes=num_nodes,
        cu_num_nodes=torch.nn.functional.pad(num_nodes.cumsum(0), (1, 0)),
    )
    validate(tree)  # on the host copies: validating the device tree would read it back (a sync per field)
    if torch.device(device).type == "cpu":
        return tree
    return DraftTree(*(tensor_to_device(t, device) for t in (tree.token_ids, tree.parent, tree.depth, tree.num_nodes,
                                                             tree.cu_num_nodes)))


def tree_from_chain(
    draft_token_ids: torch.Tensor,  # [num_reqs, max_num_draft] int64, padded
    num_draft_tokens: torch.Tensor,  # [num_reqs] int64
) -> DraftTree:
    """The chain proposal as a tree: parent[i] = i - 1."""
    counts = num_draft_tokens.tolist()
    rows = draft_token_ids.tolist()
    tokens = [row[:n] for row, n in zip(rows, counts)]
    return tree_from_parents(tokens, [list(range(-1, n - 1)) for n in counts], draft_token_ids.device)


def _check_parent(req: int, node: int, parent: int) -> None:
    if not ROOT_PARENT <= parent < node:
        raise TreeShapeError(
            f"request {req}: node {node} has parent {parent}; a parent must be -1 (the root) or an earlier node"
        )


def validate(tree: DraftTree) -> None:
    """Raise TreeShapeError naming the first inconsistency: counts, parent order, or depth."""
    total = tree.token_ids.shape[0]
    for name, field in (("parent", tree.parent), ("depth", tree.depth)):
        if tuple(field.shape) != (total,):
            raise TreeShapeError(f"{name} must be [total_nodes={total}], got {tuple(field.shape)}")
    cu = tree.cu_num_nodes.tolist()
    if cu[0] != 0 or cu[-1] != total or [b - a for a, b in itertools.pairwise(cu)] != tree.num_nodes.tolist():
        raise TreeShapeError(f"cu_num_nodes {cu} is not the prefix sum of num_nodes {tree.num_nodes.tolist()}")
    parent, depth = tree.parent.tolist(), tree.depth.tolist()
    for req in range(tree.num_reqs):
        start = cu[req]
        for i in range(cu[req + 1] - start):
            p = parent[start + i]
            _check_parent(req, i, p)
            expected = 0 if p == ROOT_PARENT else depth[start + p] + 1
            if depth[start + i] != expected:
                raise TreeShapeError(f"request {req}: node {i} has depth {depth[start + i]}, its parent says {expected}")


def ancestor_mask(parents: list[int]) -> torch.Tensor:  # [num_nodes, num_nodes] bool
    """mask[i, j]: node j is node i or one of its ancestors (never a sibling, cousin or descendant)."""
    num_nodes = len(parents)
    mask = torch.eye(num_nodes, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p != ROOT_PARENT:
            mask[i] |= mask[p]  # parents precede children: row p is final
    return mask


def verify_attention_mask(tree: DraftTree, max_num_rows: int | None = None) -> torch.Tensor:
    """Which of its request's verify rows each verify row sees: [total_rows, max_num_rows] bool.

    Row 0 of a request (the root) sees itself; row 1 + i (node i) sees the root, its ancestors and itself.
    Every row also sees the whole cached prefix, which this mask does not list (the attention adds it).
    """
    cu_rows = tree.cu_num_rows.tolist()
    cu_nodes = tree.cu_num_nodes.tolist()
    all_parents = tree.parent.tolist()  # one read, not one per request
    widest = max(b - a for a, b in itertools.pairwise(cu_rows)) if tree.num_reqs else 0
    max_num_rows = widest if max_num_rows is None else max_num_rows
    if max_num_rows < widest:
        raise TreeShapeError(f"max_num_rows {max_num_rows} is below the widest request ({widest} rows)")
    mask = torch.zeros(cu_rows[-1], max_num_rows, dtype=torch.bool)
    for req in range(tree.num_reqs):
        parents = all_parents[cu_nodes[req]: cu_nodes[req + 1]]
        n = len(parents)
        rows = slice(cu_rows[req], cu_rows[req] + 1 + n)
        block = torch.zeros(1 + n, 1 + n, dtype=torch.bool)
        block[:, 0] = True  # everyone sees the root
        block[1:, 1:] = ancestor_mask(parents)
        mask[rows, : 1 + n] = block
    return mask.to(tree.token_ids.device)


def node_positions(tree: DraftTree, num_committed: torch.Tensor) -> torch.Tensor:
    """Positions of the verify rows: [total_rows] int64; root at num_committed - 1, node i at num_committed + depth.

    num_committed: [num_reqs] int64, committed tokens per request, the root included.
    """
    device = tree.token_ids.device
    num_rows = tree.num_nodes + 1
    req_of_row = torch.repeat_interleave(torch.arange(tree.num_reqs, device=device), num_rows)  # [total_rows]
    is_root = torch.zeros(int(num_rows.sum()), dtype=torch.bool, device=device)
    is_root[tree.cu_num_rows[:-1]] = True
    depth_of_row = torch.full_like(req_of_row, -1)
    depth_of_row[~is_root] = tree.depth
    return num_committed.to(device)[req_of_row] + depth_of_row


def sibling_rank(parents: list[int]) -> list[int]:
    """Each node's rank among its parent's children, in node order (0 = first drafted, the best for top-k)."""
    seen: dict[int, int] = {}
    ranks = []
    for p in parents:
        ranks.append(seen.get(p, 0))
        seen[p] = ranks[-1] + 1
    return ranks


def children_of(parents: list[int]) -> dict[int, list[int]]:
    """Children per node (key -1 = the root), each list in node order."""
    children: dict[int, list[int]] = {ROOT_PARENT: []}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
        children.setdefault(i, [])
    return children
