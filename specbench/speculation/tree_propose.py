"""What a tree round drafts and where the drafter's own steps store and see their nodes.

`TreePlan`: a round's tree shape from the run's DraftShape and k (tree depth = k draft steps; node budget
`num_draft_tokens`, default every candidate the steps create, as DraftShape defines None). `TreeSteps`: the
frontier nodes a drafter feeds in one round. Draft step s (1 <= s < depth) feeds the frontier chosen by step
s - 1 (its nodes all sit at depth s - 1) as `topk` queries per request; their KV is stored as *tree rows* right
after the drafter's committed prefix, in feed order (row i at prefix + i: scratch the next catch-up overwrites, or
moved into place when accepted), and each query sees the prefix, its fed ancestors and itself, never a sibling or
cousin (attention/tree_mask.py). The RoPE position of a step-s query is prefix + s - 1, the position its token has
on its own branch: the same attention a chain along that branch computes.

KV a tree round writes beyond the newest committed token (`kv_rows`): the target's verify stores the root and
`num_draft_tokens` nodes at newest .. newest + num_draft_tokens; the drafter's tree rows reach
prefix - 1 + (depth - 1) * topk, prefix being newest + 1 (draft LM) or newest (EAGLE/MTP).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.attention.tree_mask import build_tree_metadata
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.proposer import DraftProposal
from specbench.speculation.tree import DraftTree, tree_from_parents
from specbench.speculation.tree_builder import Frontier, TopKTreeBuilder
from specbench.speculation.tree_records import TreeRoundTrace


@dataclass(frozen=True, slots=True)
class TreePlan:
    topk: int  # children per frontier node and frontier size per step
    depth: int  # draft steps, = the deepest a path can go (<= k)
    num_draft_tokens: int  # nodes kept per request (the root excluded)


def max_nodes(topk: int, depth: int) -> int:
    """Candidates a TopKTreeBuilder creates in `depth` steps: topk on the root, then topk * topk per step."""
    return topk + (depth - 1) * topk * topk if depth > 0 else 0


def tree_plan(shape: DraftShape, num_steps: int) -> TreePlan:
    every = max_nodes(shape.eagle_topk, num_steps)
    budget = every if shape.num_draft_tokens is None else min(shape.num_draft_tokens, every)
    return TreePlan(shape.eagle_topk, num_steps, budget)


def kv_rows(plan: TreePlan) -> int:
    """KV positions after the newest committed token a tree round of `plan` may write (target or drafter)."""
    return max(plan.num_draft_tokens, (plan.depth - 1) * plan.topk)


def proposal_from_tree(tree: DraftTree) -> DraftProposal:
    """The padded per-request proposal of a tree (every request the same node count: TopKTreeBuilder's trees)."""
    num_reqs = tree.num_reqs
    counts = tree.num_nodes.tolist()
    width = max(counts, default=0)
    token_ids = torch.full((num_reqs, width), -1, dtype=torch.int64, device=tree.token_ids.device)
    parents = torch.full((num_reqs, width), -1, dtype=torch.int64, device=tree.token_ids.device)
    for r in range(num_reqs):
        rows = tree.request_slice(r)
        token_ids[r, : counts[r]] = tree.token_ids[rows]
        parents[r, : counts[r]] = tree.parent[rows]
    return DraftProposal(token_ids, tuple(counts), None, parents)


def proposal_tree(proposal: DraftProposal) -> DraftTree:
    """The DraftTree of a tree proposal (validated: parents precede children)."""
    assert proposal.parents is not None, "a chain proposal"
    tokens, parents = proposal.draft_token_ids.tolist(), proposal.parents.tolist()
    counts = proposal.num_draft_tokens
    return tree_from_parents([t[:n] for t, n in zip(tokens, counts)], [p[:n] for p, n in zip(parents, counts)],
                             proposal.draft_token_ids.device)


class TreeSteps:
    """The tree rows one drafter feeds in one round, per request (every request the same count)."""

    def __init__(self, num_reqs: int, max_rows: int) -> None:
        self.num_reqs = num_reqs
        self.num_rows = 0
        self.masks = torch.zeros(num_reqs, max_rows, max_rows, dtype=torch.bool)  # [num_reqs, rows, rows] host
        self._row_of_node: list[dict[int, int]] = [{} for _ in range(num_reqs)]  # builder node index -> tree row
        # per request, each fed row's branch (its tokens from the root's child down to it) -> the row: siblings
        # carry distinct tokens (top-k), so a branch names one node
        self.row_of_branch: list[dict[tuple[int, ...], int]] = [{} for _ in range(num_reqs)]
        self._branch_of_row: list[list[tuple[int, ...]]] = [[] for _ in range(num_reqs)]

    def feed(self, frontier: Frontier) -> list[list[int]]:
        """Append the frontier as the next tree rows; per request, the tree row of each node's parent (-1: the root,
        which is no tree row: it is the last prefix position)."""
        nodes, parents = frontier.node_index.tolist(), frontier.parent.tolist()
        tokens = frontier.token_ids.tolist()
        first = self.num_rows
        parent_rows = []
        for r in range(self.num_reqs):
            rows_r = []
            for f, (node, parent) in enumerate(zip(nodes[r], parents[r])):
                row = first + f
                parent_row = self._row_of_node[r].get(parent, -1)
                # every frontier node's parent was fed the step before (or is the root): its branch is all fed
                assert parent == -1 or parent_row >= 0, "a frontier node whose parent was never fed"
                if parent_row >= 0:
                    self.masks[r, row] = self.masks[r, parent_row]
                self.masks[r, row, row] = True
                self._row_of_node[r][node] = row
                branch = (self._branch_of_row[r][parent_row] if parent_row >= 0 else ()) + (tokens[r][f],)
                self._branch_of_row[r].append(branch)
                self.row_of_branch[r][branch] = row
                rows_r.append(parent_row)
            parent_rows.append(rows_r)
        self.num_rows += len(nodes[0]) if nodes else 0
        return parent_rows

    def step_metadata(self, step: int, num_new: int, prefix_lens: list[int], block_tables, block_size: int,
                      device: torch.device) -> AttentionMetadata:
        """Metadata of draft step `step` over the `num_new` rows fed last (their queries), after `prefix_lens[r]`
        committed draft positions of each request."""
        first, num_rows = self.num_rows - num_new, self.num_rows
        positions, storage = [], []
        for prefix in prefix_lens:
            positions += [prefix + step - 1] * num_new
            storage += [prefix + first + f for f in range(num_new)]
        mask = self.masks[:, first:num_rows, :num_rows].reshape(self.num_reqs * num_new, num_rows)
        return build_tree_metadata(
            positions=positions, storage_positions=storage, num_query=[num_new] * self.num_reqs,
            num_tree_rows=[num_rows] * self.num_reqs, seq_lens=[p + num_rows for p in prefix_lens], mask=mask,
            block_tables=list(block_tables), block_size=block_size, device=device,
        )


def grow_tree(plan: TreePlan, root_log_probs: torch.Tensor,
              run_step: Callable[[int, Frontier, TreeSteps, list[list[int]]], torch.Tensor],
              trace: TreeRoundTrace | None = None) -> tuple[DraftTree, TreeSteps]:
    """Grow one round's trees: the root's top-k children, then `plan.depth - 1` draft steps over the frontier.

    `root_log_probs` [num_reqs, V]: the drafter's log-probs after the newest committed token. `run_step(s, frontier,
    steps, parent_rows)` feeds draft step s (the frontier just appended to `steps`; parent_rows per request the tree
    row of each frontier node's parent, -1 = root) and returns the log-probs at each frontier node
    [num_reqs, num_frontier, V]. Token ids are the drafter's vocabulary; the caller maps them. Returns the trees and
    the rows the drafter fed (whose KV an accepted path may keep). `trace`: the draft oracle's recording
    (speculation/tree_records.py), None unless a recorder is attached.
    """
    num_reqs = root_log_probs.shape[0]
    builder = TopKTreeBuilder(num_reqs, plan.topk, plan.num_draft_tokens, root_log_probs.device)
    steps = TreeSteps(num_reqs, max(0, (plan.depth - 1) * plan.topk))
    frontier = builder.expand(root_log_probs[:, None].float())
    for s in range(1, plan.depth):
        parent_rows = steps.feed(frontier)
        log_probs = run_step(s, frontier, steps, parent_rows)
        if trace is not None:
            trace.step(frontier, parent_rows, log_probs)
        frontier = builder.expand(log_probs.float())
    tree = builder.finish()
    if trace is not None:
        trace.finish(root_log_probs, tree, steps.masks)
    return tree, steps
