"""What a tree draft step is handed and what a round's growth hands back: the contract between a drafter's
`run_step` and the growth on either path (the device's, device.py; the host reference, propose.py), which the draft
oracle's trace (records.py) observes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.speculation.tree.builder import Frontier


@dataclass(frozen=True, slots=True)
class StepLayout:
    """Where a batch's tree rows go: fixed per round, read by every draft step."""

    prefix: torch.Tensor  # [num_reqs] int64 (device), committed draft positions before the tree rows
    block_tables: torch.Tensor  # [num_reqs, max_num_blocks] int32 (device)
    block_size: int
    max_seq_len: int  # host bound on every position the round reaches (RoPE tables; a graph's captured bound)
    # [num_reqs] bool (device): False for a CUDA graph's padding request (writes nothing); None = every request real
    is_real: torch.Tensor | None = None
    # Host views for the metadata's host copies (eager rounds: the reference backends and the debug invariants read
    # them); None inside a graph, whose metadata has none (runtime/cuda_graph.py StaticBuffers.metadata).
    prefix_lens: tuple[int, ...] | None = None
    read_back: bool = False  # debug invariants: copy the device-derived positions, slots and mask to the host (syncs)


@dataclass(frozen=True, slots=True)
class TreeStepInput:
    """What a drafter runs at draft step `step` (1 <= step < depth), on either path (host reference or device)."""

    step: int
    frontier: Frontier  # the nodes fed this step, [num_reqs, num_frontier] each
    md: AttentionMetadata  # num_reqs x num_frontier queries over the tree rows fed so far
    parent_row: torch.Tensor  # [num_reqs, num_frontier] int64 tree row of each node's parent, -1 = the root
    first_row: int  # the tree row of frontier node 0 (rows first_row .. first_row + num_frontier - 1)


# run_step(inp) -> draft log-probs at each frontier node [num_reqs, num_frontier, V]
RunTreeStep = Callable[[TreeStepInput], torch.Tensor]


@dataclass(frozen=True, slots=True)
class GrownTree:
    """One round's trees, every request the same node count (TopKTreeBuilder), in the drafter's vocabulary."""

    token_ids: torch.Tensor  # [num_reqs, num_kept] int64, node order (parents first)
    parent: torch.Tensor  # [num_reqs, num_kept] int64, request-local parent node, -1 = child of the root
    fed_row: torch.Tensor  # [num_reqs, num_kept] int64 tree row a draft step fed the node at, -1 = never fed


# grow(plan, root_log_probs, layout, run_step, trace): grow_tree_on_device, or tree.propose.grow_tree_reference (the
# host reference tests run in its place)
GrowTree = Callable[..., GrownTree]
