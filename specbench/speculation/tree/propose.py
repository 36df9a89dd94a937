"""Growing a round's trees on the host, and tree proposals as DraftTrees.

`TreeSteps`: the frontier nodes a drafter feeds in one round, built on the host: the readable reference of the device
path the drafters run (tree/device.py: the same rows, masks, positions and slots by tensor ops, capturable in a CUDA
graph). Draft step s (1 <= s < depth, plan.py) feeds the frontier chosen by step
s - 1 (its nodes all sit at depth s - 1) as `topk` queries per request; their KV is stored as *tree rows* right
after the drafter's committed prefix, in feed order (row i at prefix + i: scratch the next catch-up overwrites, or
moved into place when accepted), and each query sees the prefix, its fed ancestors and itself, never a sibling or
cousin (attention/tree_mask.py). The RoPE position of a step-s query is prefix + s - 1, the position its token has
on its own branch: the same attention a chain along that branch computes.
"""

from __future__ import annotations

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.attention.tree_mask import build_tree_metadata
from specbench.speculation.proposer import DraftProposal
from specbench.speculation.tree.draft_tree import DraftTree, tree_from_parents
from specbench.speculation.tree.builder import Frontier, TopKTreeBuilder
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.tree.records import TreeRoundTrace
from specbench.speculation.tree.step import GrownTree, RunTreeStep, StepLayout, TreeStepInput
from specbench.device_copy import tensor_to_device


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


def grow_tree(plan: TreePlan, root_log_probs: torch.Tensor, layout: StepLayout, run_step: RunTreeStep,
              trace: TreeRoundTrace | None = None) -> tuple[DraftTree, TreeSteps]:
    """Grow one round's trees on the host (the reference the device path, tree.device.grow_tree_on_device, is
    tested against): the root's top-k children, then `plan.depth - 1` draft steps over the frontier.

    `root_log_probs` [num_reqs, V]: the drafter's log-probs after the newest committed token. `run_step` feeds draft
    step s (the frontier just appended to the steps) and returns the log-probs at each frontier node
    [num_reqs, num_frontier, V]. `layout.prefix_lens` must be set (host prefix lengths). Token ids are the drafter's
    vocabulary; the caller maps them. Returns the trees and the rows the drafter fed (whose KV an accepted path may
    keep). `trace` sees every draft step as on the device path (grow_tree_reference finishes it).
    """
    assert layout.prefix_lens is not None, "the host reference needs the prefix lengths on the host"
    num_reqs = root_log_probs.shape[0]
    device = root_log_probs.device
    block_tables = layout.block_tables.tolist()  # host reference: reads the device back
    builder = TopKTreeBuilder(num_reqs, plan.topk, plan.num_draft_tokens, device)
    steps = TreeSteps(num_reqs, max(0, (plan.depth - 1) * plan.topk))
    frontier = builder.expand(root_log_probs[:, None].float())
    for s in range(1, plan.depth):
        parent_rows = steps.feed(frontier)
        num_frontier = frontier.token_ids.shape[1]
        md = steps.step_metadata(s, num_frontier, list(layout.prefix_lens), block_tables, layout.block_size, device)
        parent_row = tensor_to_device(torch.tensor(parent_rows, dtype=torch.int64), device)
        step_in = TreeStepInput(s, frontier, md, parent_row, steps.num_rows - num_frontier)
        log_probs = run_step(step_in)
        if trace is not None:
            trace.step(step_in, log_probs)
        frontier = builder.expand(log_probs.float())
    return builder.finish(), steps


def grow_tree_reference(plan: TreePlan, root_log_probs: torch.Tensor, layout: StepLayout, run_step: RunTreeStep,
                        trace: TreeRoundTrace | None = None) -> GrownTree:
    """`grow_tree` with the device path's result: padded trees and the fed row of each kept node (found by its
    branch: siblings carry distinct tokens, so a branch names one node); `trace` as grow_tree_on_device's."""
    tree, steps = grow_tree(plan, root_log_probs, layout, run_step, trace)
    fed = []
    for r in range(tree.num_reqs):
        request_tokens, parents = tree.tokens_of(r), tree.parents_of(r)
        branches: list[tuple[int, ...]] = []
        for token, parent in zip(request_tokens, parents):
            branches.append((branches[parent] if parent >= 0 else ()) + (token,))
        fed.append([steps.row_of_branch[r].get(branch, -1) for branch in branches])
    proposal = proposal_from_tree(tree)
    device = root_log_probs.device
    grown = GrownTree(proposal.draft_token_ids, proposal.parents,
                      tensor_to_device(torch.tensor(fed, dtype=torch.int64), device))
    if trace is not None:
        trace.finish(root_log_probs, grown)
    return grown
