"""Random tree-round inputs for the batched tree tests (CPU and CUDA)."""

from __future__ import annotations

import torch

from specbench.speculation.tree.draft_tree import DraftTree, tree_from_parents


def random_trees(gen: torch.Generator, num_reqs: int, max_nodes: int, vocab: int) -> DraftTree:
    """Ragged trees (0..max_nodes nodes, any parent before the node), tokens from a small vocab so matches happen
    and siblings may repeat a token."""
    tokens, parents = [], []
    for _ in range(num_reqs):
        n = int(torch.randint(0, max_nodes + 1, (), generator=gen))
        parents.append([int(torch.randint(-1, i, (), generator=gen)) for i in range(n)])
        tokens.append(torch.randint(0, vocab, (n,), generator=gen).tolist())
    return tree_from_parents(tokens, parents)


def random_round(gen: torch.Generator, num_reqs: int, max_nodes: int, num_blocks: int):
    """Random ragged trees with random accepted root-to-node paths, num_cached, disjoint shuffled block tables."""
    tree = random_trees(gen, num_reqs, max_nodes, 5)
    cached = torch.randint(0, 9, (num_reqs,), generator=gen)
    blocks_per_req = num_blocks // num_reqs
    tables = torch.randperm(num_blocks, generator=gen)[: num_reqs * blocks_per_req].view(num_reqs, blocks_per_req)
    paths = []
    for r in range(num_reqs):
        parents = tree.parents_of(r)
        node = int(torch.randint(-1, len(parents), (), generator=gen)) if parents else -1
        path = []
        while node != -1:
            path.append(node)
            node = parents[node]
        paths.append(path[::-1])
    width = max(max(tree.num_nodes.tolist()), 1)
    accepted = torch.tensor([p + [-1] * (width - len(p)) for p in paths])
    return accepted, torch.tensor([len(p) for p in paths]), cached, tables.int()
