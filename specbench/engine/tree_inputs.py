"""The target's verify input for a tree proposal (the layout of docs/tree-verify.md).

Request r feeds its root (the newest committed token, at position num_cached) and then its nodes in node order;
node i sits at position num_cached + 1 + depth[i] but is stored at num_cached + 1 + i (its tree row), and sees the
cached prefix, the root, its ancestors and itself (attention/tree_mask.py). After verification the accepted
path's KV is moved to its positions (speculation/tree_kv.py, engine/tree_round.py).
"""

from __future__ import annotations

import torch

from specbench.attention.tree_mask import build_tree_metadata
from specbench.device_copy import to_device
from specbench.engine.request import Request
from specbench.runtime.phases import VerifyInput
from specbench.speculation.proposer import DraftProposal
from specbench.speculation.tree import DraftTree, verify_attention_mask


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
