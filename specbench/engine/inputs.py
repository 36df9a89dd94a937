"""Build the target's phase inputs (prefill, verify) from scheduled requests."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import build_metadata
from specbench.device_copy import to_device
from specbench.runtime.phases import PrefillInput, VerifyInput
from specbench.engine.logprobs import is_prompt_logprobs_due, prompt_rows
from specbench.engine.request import Request
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.engine.tree_inputs import build_tree_verify_input
from specbench.speculation.proposer import DraftProposal
from specbench.speculation.tree.propose import proposal_tree


def build_prefill_input(requests: tuple[Request, ...], block_size: int, device: torch.device) -> PrefillInput:
    """Per request: its tokens from num_cached_tokens on (a prefix-cache hit's KV is in its first blocks already),
    attending to every position before them."""
    input_ids: list[int] = []
    positions: list[int] = []
    num_query: list[int] = []
    seq_lens: list[int] = []
    logits_indices: list[int] = []
    for request in requests:
        tokens = request.token_ids
        start = request.num_cached_tokens
        input_ids.extend(tokens[start:])
        positions.extend(range(start, len(tokens)))
        num_query.append(len(tokens) - start)
        seq_lens.append(len(tokens))
        logits_indices.append(len(input_ids) - 1)
    md = build_metadata(
        positions=positions,
        num_query=num_query,
        seq_lens=seq_lens,
        block_tables=[r.block_table for r in requests],
        block_size=block_size,
        device=device,
    )
    rows = prompt_rows(requests)[0] if any(is_prompt_logprobs_due(r) for r in requests) else None
    return PrefillInput(to_device(input_ids, torch.int64, device), md, to_device(logits_indices, torch.int64, device),
                        None if rows is None else to_device(rows, torch.int64, device))


def build_verify_input(
    requests: tuple[Request, ...],
    proposal: DraftProposal | None,
    block_size: int,
    device: torch.device,
    hooks: PhaseHooks = NO_HOOKS,
    newest_token_ids: torch.Tensor | None = None,  # [num_reqs] int64 on the device; None: the requests' own
) -> VerifyInput:
    """Per request: the newest token at position num_cached, then its drafts.

    Drafts may live on the device; they are gathered there with host-built
    indices so building the verify input never waits on the proposer. An overlapped
    decode step passes `newest_token_ids`: the previous step's sampled tokens, still on
    the device (the host has not read them yet).
    """
    if proposal is not None and proposal.parents is not None:  # a tree: its own layout and mask
        return build_tree_verify_input(requests, proposal, proposal_tree(proposal), block_size, device)
    rows = verify_layout(requests, proposal, block_size, device, hooks, newest_token_ids)
    md = build_metadata(
        positions=rows.positions,
        num_query=rows.num_query,
        seq_lens=rows.seq_lens,
        block_tables=rows.block_tables,
        block_size=block_size,
        device=device,
        slot_mapping=rows.slot_mapping,
    )
    # Counts stay on the host: the verifier reads them for seeded requests without a device sync.
    return VerifyInput(rows.input_ids, md, torch.tensor(rows.num_drafts, dtype=torch.int64), rows.draft_token_ids,
                       rows.draft_probs)


@dataclass(frozen=True, slots=True)
class VerifyLayout:
    """A chain verify's rows before its metadata is built (build_verify_input; a mixed step appends chunks)."""

    input_ids: torch.Tensor  # [num_tokens] device
    positions: list[int]  # [num_tokens]
    num_query: list[int]  # [num_reqs] 1 + drafts
    seq_lens: list[int]  # [num_reqs]
    block_tables: list[list[int]]  # [num_reqs][num_blocks]
    slot_mapping: list[int] | None  # [num_tokens]; None: each position's own slot
    num_drafts: list[int]  # [num_reqs]
    draft_token_ids: torch.Tensor  # [num_reqs, max_num_draft] int64, padded with -1
    draft_probs: torch.Tensor | None  # [num_reqs, max_num_draft, vocab] or None


def verify_layout(requests: tuple[Request, ...], proposal: DraftProposal | None, block_size: int,
                  device: torch.device, hooks: PhaseHooks = NO_HOOKS,
                  newest_token_ids: torch.Tensor | None = None) -> VerifyLayout:
    """Per request: the newest token at position num_cached, then its drafts (a chain proposal or none)."""
    num_reqs = len(requests)
    num_drafts = list(proposal.num_draft_tokens) if proposal is not None else [0] * num_reqs
    if proposal is not None:
        draft_token_ids, draft_probs = proposal.draft_token_ids, proposal.draft_probs
    else:
        draft_token_ids = torch.empty(num_reqs, 0, dtype=torch.int64, device=device)
        draft_probs = None
    width = 1 + draft_token_ids.shape[1]
    if newest_token_ids is None:
        newest = [r.output_token_ids[-1] if r.output_token_ids else r.prompt_token_ids[-1] for r in requests]
        newest_token_ids = to_device(newest, torch.int64, device)
    positions: list[int] = []
    seq_lens: list[int] = []
    gather: list[int] = []  # row-major index into [num_reqs, 1 + max_num_draft]
    for r, request in enumerate(requests):
        start = request.num_cached_tokens
        positions.extend(range(start, start + 1 + num_drafts[r]))
        seq_lens.append(start + 1 + num_drafts[r])
        gather.extend(range(r * width, r * width + 1 + num_drafts[r]))
    if draft_token_ids.shape[1] == 0:
        input_ids = newest_token_ids  # plain decode: one query per request, nothing to interleave
    else:
        table = torch.cat([newest_token_ids[:, None], draft_token_ids.to(device)], dim=1)
        input_ids = table.reshape(-1)[to_device(gather, torch.int64, device)]
    num_query = [1 + n for n in num_drafts]
    block_tables = [r.block_table for r in requests]
    slot_mapping = None
    if proposal is not None:
        slot_mapping = hooks.verify_slot_mapping(block_tables, positions, num_query, block_size)
    return VerifyLayout(input_ids, positions, num_query, seq_lens, block_tables, slot_mapping, num_drafts,
                        draft_token_ids, draft_probs)
