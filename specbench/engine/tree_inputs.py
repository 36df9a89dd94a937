"""The target's verify input for a tree proposal (the layout of docs/tree-verify.md).

Request r feeds its root (the newest committed token, at position num_cached) and then its nodes in node order;
node i sits at position num_cached + 1 + depth[i] but is stored at num_cached + 1 + i (its tree row), and sees the
cached prefix, the root, its ancestors and itself (attention/tree_mask.py). After verification the accepted
path's KV is moved to its positions (speculation/tree/kv.py, engine/tree_round.py).

Two builders of the same input: `build_tree_verify_input` lays it out on the host from the tree's host copy (the
readable reference; ragged trees), `build_uniform_tree_verify_input` on the device from the proposal's tensors
(the drafters' trees, every request the same node count), so the engine enqueues the verify right behind the
draft without reading the tree back. The host knows everything but the tree's shape: the storage rows, their
slots and the counts are host lists; the positions (depths) and the mask come from device ops.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from specbench.attention.metadata import build_metadata
from specbench.attention.tree_mask import build_tree_metadata
from specbench.attention.metadata import TreeMask
from specbench.device_copy import to_device
from specbench.engine.request import Request
from specbench.runtime.phases import VerifyInput
from specbench.speculation.proposer import DraftProposal
from specbench.speculation.tree.draft_tree import DraftTree, validate, verify_attention_mask
from specbench.speculation.tree.padded import PaddedTree, uniform_tree, verify_mask


@dataclass(frozen=True, slots=True)
class TreeVerifyLayout:
    """A tree round's verify input and the tree it lays out (device tensors, no host read)."""

    inp: VerifyInput
    tree: DraftTree
    padded: PaddedTree  # the tree padded to its node count: what the batched verifier and the path algebra take


def is_uniform(proposal: DraftProposal) -> bool:
    """Every request drafted the same number of nodes (what build_uniform_tree_verify_input lays out)."""
    return len(set(proposal.num_draft_tokens)) == 1 and proposal.num_draft_tokens[0] > 0


def build_uniform_tree_verify_input(requests: tuple[Request, ...], proposal: DraftProposal, block_size: int,
                                    device: torch.device, *, read_back: bool = False) -> TreeVerifyLayout:
    """The verify input of a uniform tree proposal (is_uniform) with device ops only. `read_back` (debug
    invariants): validate the tree on a host copy and give the metadata host copies of the device-built positions
    and mask, so INV-TREE checks what the device built (syncs)."""
    assert proposal.parents is not None and is_uniform(proposal), "a uniform tree proposal"
    num_reqs, num_nodes = len(requests), proposal.num_draft_tokens[0]
    tree, padded = uniform_tree(proposal.draft_token_ids[:, :num_nodes], proposal.parents[:, :num_nodes])
    if read_back:
        validate(DraftTree(*(t.cpu() for t in (tree.token_ids, tree.parent, tree.depth, tree.num_nodes,
                                              tree.cu_num_nodes))))
    starts = [r.num_cached_tokens for r in requests]
    newest = [r.output_token_ids[-1] if r.output_token_ids else r.prompt_token_ids[-1] for r in requests]
    num_rows = 1 + num_nodes
    # Built on the storage positions, so the slots are each row's storage slot; the RoPE positions follow below.
    md = build_metadata(positions=[s + i for s in starts for i in range(num_rows)], num_query=[num_rows] * num_reqs,
                        seq_lens=[s + num_rows for s in starts], block_tables=[r.block_table for r in requests],
                        block_size=block_size, device=device)
    host = to_device([*starts, *newest], torch.int64, device)
    start, newest_ids = host[:num_reqs], host[num_reqs:]
    # the root at its start, node i at start + 1 + depth[i]
    positions = (start[:, None] + torch.nn.functional.pad(1 + padded.depth, (1, 0))).reshape(-1)
    mask = verify_mask(padded)  # [num_reqs * num_rows, num_rows]
    tree_mask = TreeMask(mask=mask, mask_cpu=mask.cpu() if read_back else torch.zeros(0, num_rows, dtype=torch.bool),
                         num_tree_rows=(num_rows,) * num_reqs, is_verify=True)
    md = dataclasses.replace(md, positions=positions, tree=tree_mask,
                             positions_cpu=tuple(positions.tolist()) if read_back else ())
    input_ids = torch.cat([newest_ids[:, None], proposal.draft_token_ids[:, :num_nodes]], dim=1).reshape(-1)
    inp = VerifyInput(input_ids, md, torch.tensor(proposal.num_draft_tokens, dtype=torch.int64),
                      proposal.draft_token_ids, None)
    return TreeVerifyLayout(inp, tree, padded)


def build_tree_verify_input(requests: tuple[Request, ...], proposal: DraftProposal, tree: DraftTree,
                            block_size: int, device: torch.device) -> VerifyInput:
    num_reqs = len(requests)
    num_nodes = list(proposal.num_draft_tokens)
    depths = tree.depth.tolist()
    cu = tree.cu_num_nodes.tolist()
    positions, storage, input_ids = [], [], []
    tokens = proposal.draft_token_ids.tolist()
    for r, request in enumerate(requests):
        start = request.num_cached_tokens
        newest = request.output_token_ids[-1] if request.output_token_ids else request.prompt_token_ids[-1]
        input_ids += [newest, *tokens[r][: num_nodes[r]]]
        positions += [start, *(start + 1 + d for d in depths[cu[r]: cu[r + 1]])]
        storage += range(start, start + 1 + num_nodes[r])
    num_query = [1 + n for n in num_nodes]
    md = build_tree_metadata(
        positions=positions, storage_positions=storage, num_query=num_query, num_tree_rows=num_query,
        seq_lens=[r.num_cached_tokens + n for r, n in zip(requests, num_query)],
        mask=verify_attention_mask(tree).cpu(),
        block_tables=[r.block_table for r in requests], block_size=block_size, device=device,
    )
    assert len(input_ids) == md.num_tokens and num_reqs == md.num_reqs
    return VerifyInput(to_device(input_ids, torch.int64, device), md, torch.tensor(num_nodes, dtype=torch.int64),
                       proposal.draft_token_ids, None)
