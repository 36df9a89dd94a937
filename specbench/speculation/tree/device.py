"""A round's tree draft steps on the device: the tree rows' masks, positions, storage slots and parent rows from
the frontier tensors with fixed-shape tensor ops, no host sync and no Python per request or node, so the whole tree
draft can be captured in a CUDA graph (speculation/tree/graph.py) and runs eagerly without a sync per step.

The layout is tree/propose.py's (TreeSteps, the host reference this is tested against): draft step s feeds the
frontier chosen by step s - 1 as the next `num_frontier` tree rows of every request (TopKTreeBuilder gives every
request the same frontier width), stored after the request's committed draft prefix in feed order; a row sees the
prefix, its fed ancestors and itself; its RoPE position is prefix + s - 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata
from specbench.attention.metadata import TreeMask
from specbench.device_copy import to_device
from specbench.speculation.tree.builder import Frontier, PaddedTree, TopKTreeBuilder
from specbench.speculation.tree.plan import TreePlan, max_nodes
from specbench.speculation.tree.step import GrownTree, RunTreeStep, StepLayout, TreeStepInput

if TYPE_CHECKING:
    from specbench.speculation.tree.records import TreeRoundTrace


def block_table_tensor(block_tables, device: torch.device) -> torch.Tensor:  # [num_reqs, max_num_blocks] int32
    """The batch's block tables padded with block 0 (one host-to-device copy)."""
    width = max((len(b) for b in block_tables), default=0) or 1
    flat = [block for blocks in block_tables for block in (*blocks, *(0,) * (width - len(blocks)))]
    return to_device(flat, torch.int32, device).view(len(block_tables), width)


class DeviceTreeSteps:
    """The tree rows one drafter feeds in one round, as device tensors (every request the same count)."""

    def __init__(self, num_reqs: int, max_rows: int, max_nodes: int, device: torch.device) -> None:
        self.num_reqs = num_reqs
        self.max_rows = max_rows
        self.num_rows = 0  # host: rows fed so far, the same for every request
        self.device = device
        self.masks = torch.zeros(num_reqs, max_rows, max_rows, dtype=torch.bool, device=device)  # [R, rows, rows]
        self.row_of_node = torch.full((num_reqs, max(1, max_nodes)), -1, dtype=torch.int64, device=device)  # [R, N]
        self._row_index = torch.arange(max_rows, device=device)  # [rows]

    def feed(self, frontier: Frontier) -> torch.Tensor:
        """Append the frontier as the next tree rows; returns each node's parent row [num_reqs, num_frontier]
        (-1: the root, which is no tree row but the last prefix position)."""
        num_frontier = frontier.node_index.shape[1]
        first = self.num_rows
        rows = self._row_index[first: first + num_frontier]  # [F]
        is_root_child = frontier.parent < 0
        parent_row = torch.where(is_root_child, -1, self.row_of_node.gather(1, frontier.parent.clamp_min(0)))
        inherited = self.masks.gather(1, parent_row.clamp_min(0)[..., None].expand(-1, -1, self.max_rows))
        own = self._row_index[None, :] == rows[:, None]  # [F, rows]: each row sees itself
        self.masks[:, first: first + num_frontier] = (inherited & ~is_root_child[..., None]) | own
        self.row_of_node.scatter_(1, frontier.node_index, rows.expand(self.num_reqs, -1))
        self.num_rows += num_frontier
        return parent_row

    def fed_rows(self, tree: PaddedTree) -> torch.Tensor:  # [num_reqs, num_kept] int64, -1 = never fed
        """The tree row each kept node was fed at (its draft KV, which an accepted path may keep)."""
        return self.row_of_node.gather(1, tree.source)

    def step_metadata(self, step: int, num_new: int, layout: StepLayout) -> AttentionMetadata:
        """Metadata of draft step `step` over the `num_new` rows fed last, built with device ops from `layout`."""
        first, num_rows, n = self.num_rows - num_new, self.num_rows, self.num_reqs
        device = self.device
        prefix = layout.prefix[:, None]  # [R, 1]
        positions = (prefix + (step - 1)).expand(n, num_new)  # [R, F]
        storage = prefix + self._row_index[None, first:num_rows]  # [R, F]
        bs = layout.block_size
        blocks = layout.block_tables.gather(1, storage // bs).to(torch.int64)
        slots = blocks * bs + storage % bs
        if layout.is_real is not None:  # a graph's padding requests write nothing
            slots = torch.where(layout.is_real[:, None], slots, PADDING_SLOT)
        seq_lens = (layout.prefix + num_rows).to(torch.int32)
        query_start_loc = torch.arange(0, (n + 1) * num_new, num_new, dtype=torch.int32, device=device)
        mask = self.masks[:, first:num_rows, :num_rows].reshape(n * num_new, num_rows)
        # Step 1's tree rows are exactly its queries: the verify layout (build_tree_metadata says the same).
        is_verify = first == 0
        tree_rows = None if is_verify else torch.full((n,), num_rows, dtype=torch.int32, device=device)
        positions, slots = positions.reshape(-1), slots.reshape(-1)
        host = _host_copies(layout, positions, slots, mask, num_new, num_rows)
        tree = TreeMask(mask=mask, mask_cpu=host.mask, num_tree_rows=(num_rows,) * n, is_verify=is_verify,
                        tree_rows=tree_rows)
        return AttentionMetadata(
            positions=positions, slot_mapping=slots, query_start_loc=query_start_loc, seq_lens=seq_lens,
            block_tables=layout.block_tables, block_size=bs, max_query_len=num_new, max_seq_len=layout.max_seq_len,
            query_start_loc_cpu=host.query_start_loc, seq_lens_cpu=host.seq_lens, positions_cpu=host.positions,
            slot_mapping_cpu=host.slot_mapping, block_tables_cpu=host.block_tables, tree=tree,
        )


@dataclass(frozen=True, slots=True)
class _HostCopies:
    query_start_loc: tuple[int, ...]  # [num_reqs + 1]
    seq_lens: tuple[int, ...]  # [num_reqs]
    positions: tuple[int, ...]  # [num_tokens] read back (debug) or ()
    slot_mapping: tuple[int, ...]  # [num_tokens] read back (debug) or ()
    block_tables: tuple[tuple[int, ...], ...]  # [num_reqs][max_num_blocks] read back (debug) or ()
    mask: torch.Tensor  # [num_tokens, num_rows] bool read back (debug) or [0, num_rows]


def _host_copies(layout: StepLayout, positions: torch.Tensor, slots: torch.Tensor, mask: torch.Tensor,
                 num_new: int, num_rows: int) -> _HostCopies:
    """The host copies an eager step's metadata carries: the counts the host knows (no sync), and with `read_back`
    the device-derived positions, slots and mask, so the debug invariants (INV-TREE) check what the device built."""
    if layout.prefix_lens is None:
        return _HostCopies((), (), (), (), (), torch.zeros(0, num_rows, dtype=torch.bool))
    n = len(layout.prefix_lens)
    cu = tuple(range(0, (n + 1) * num_new, num_new))
    seq_lens = tuple(p + num_rows for p in layout.prefix_lens)
    if not layout.read_back:
        return _HostCopies(cu, seq_lens, (), (), (), torch.zeros(0, num_rows, dtype=torch.bool))
    return _HostCopies(cu, seq_lens, tuple(positions.tolist()), tuple(slots.tolist()),
                       tuple(map(tuple, layout.block_tables.tolist())), mask.cpu())


def grow_tree_on_device(plan: TreePlan, root_log_probs: torch.Tensor, layout: StepLayout, run_step: RunTreeStep,
                        trace: TreeRoundTrace | None = None) -> GrownTree:
    """tree.propose.grow_tree on the device: the root's top-k children, then `plan.depth - 1` draft steps over the
    frontier, then the budget cut, all with fixed-shape device ops (`run_step` must add no sync either for the round
    to be capturable). `root_log_probs` [num_reqs, V]; token ids are the drafter's vocabulary. `trace`: the draft
    oracle's recording of an eager round (speculation/tree/records.py: device copies per step, one read back at the
    end), None unless a recorder is attached: a graph's capture and production rounds pass None."""
    num_reqs = root_log_probs.shape[0]
    device = root_log_probs.device
    builder = TopKTreeBuilder(num_reqs, plan.topk, plan.num_draft_tokens, device)
    steps = DeviceTreeSteps(num_reqs, max(0, (plan.depth - 1) * plan.topk), max_nodes(plan.topk, plan.depth), device)
    frontier = builder.expand(root_log_probs[:, None].float())
    for s in range(1, plan.depth):
        parent_row = steps.feed(frontier)
        num_frontier = frontier.token_ids.shape[1]
        md = steps.step_metadata(s, num_frontier, layout)
        step_in = TreeStepInput(s, frontier, md, parent_row, steps.num_rows - num_frontier)
        log_probs = run_step(step_in)
        if trace is not None:
            trace.step(step_in, log_probs)
        frontier = builder.expand(log_probs.float())
    tree = builder.finish_on_device()
    grown = GrownTree(tree.token_ids, tree.parent, steps.fed_rows(tree))
    if trace is not None:
        trace.finish(root_log_probs, grown)
    return grown
