"""The target input of a mixed step (chunked prefill): a chain verify (or plain decode) batch and prompt chunks in one
forward, each request its own attention segment. A chunk is a segment like any other: positions [start, end), seq_len
end; position-dependent metadata (sliding windows, sinks) is built from each query's own position by the model's
layer kinds, so windowed and sink targets need nothing here. Tree verifies are never mixed (Scheduler.schedule_mixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import build_metadata, slot_of
from specbench.device_copy import to_device
from specbench.engine.inputs import verify_layout
from specbench.engine.logprobs import is_prompt_logprobs_due
from specbench.engine.prefill_chunk import PrefillChunk
from specbench.engine.request import Request
from specbench.runtime.hooks import NO_HOOKS, PhaseHooks
from specbench.runtime.phases import MixedInput
from specbench.speculation.proposer import DraftProposal


@dataclass(frozen=True, slots=True)
class ChunkRows:
    """Where each chunk sits in the mixed forward (host lists, for the step's read-back)."""

    first_rows: tuple[int, ...]  # [num_chunks] the forward row of each chunk's first token
    # [num_prompt_rows] the prompt token each prompt-logits row predicts, and per chunk (first index into those rows,
    # count, the position of its first row); (0, 0, start) where no prompt logprobs are due
    prompt_targets: tuple[int, ...]
    prompt_spans: tuple[tuple[int, int, int], ...]


def build_mixed_input(requests: tuple[Request, ...], proposal: DraftProposal | None,
                      chunks: tuple[PrefillChunk, ...], block_size: int, device: torch.device,
                      hooks: PhaseHooks = NO_HOOKS) -> tuple[MixedInput, ChunkRows]:
    """[verify rows of `requests`..., each chunk's tokens...]; logits rows: every verify row, then each final chunk's
    last row (the only chunk rows that sample)."""
    rows = verify_layout(requests, proposal, block_size, device, hooks)
    positions, num_query, seq_lens = list(rows.positions), list(rows.num_query), list(rows.seq_lens)
    block_tables = list(rows.block_tables)
    slot_mapping = None if rows.slot_mapping is None else list(rows.slot_mapping)
    num_verify_rows = len(positions)
    chunk_ids: list[int] = []
    first_rows: list[int] = []
    final_rows: list[int] = []
    prompt_rows: list[int] = []
    prompt_targets: list[int] = []
    prompt_spans: list[tuple[int, int, int]] = []
    for chunk in chunks:
        request = chunk.request
        first = len(positions)
        chunk_positions = hooks.chunk_positions(request.request_id, chunk.start, chunk.num_tokens)
        chunk_ids.extend(request.token_ids[chunk.start : chunk.end])
        positions.extend(chunk_positions)
        num_query.append(chunk.num_tokens)
        seq_lens.append(chunk_positions[-1] + 1)
        block_tables.append(request.block_table)
        if slot_mapping is not None:
            slot_mapping.extend(slot_of(request.block_table, p, block_size) for p in chunk_positions)
        first_rows.append(first)
        if chunk.is_final:
            final_rows.append(hooks.chunk_logits_row(request.request_id, first + chunk.num_tokens - 1))
        # Row p predicts prompt token p + 1: positions [start, min(end, P - 1)) of this chunk.
        num_prompt = max(0, min(chunk.end, len(request.prompt_token_ids) - 1) - chunk.start)
        if is_prompt_logprobs_due(request) and num_prompt:
            prompt_spans.append((len(prompt_rows), num_prompt, chunk.start))
            prompt_rows.extend(range(first, first + num_prompt))
            prompt_targets.extend(request.prompt_token_ids[chunk.start + 1 : chunk.start + 1 + num_prompt])
        else:
            prompt_spans.append((0, 0, chunk.start))
    md = build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=block_tables,
                        block_size=block_size, device=device, slot_mapping=slot_mapping)
    input_ids = torch.cat([rows.input_ids, to_device(chunk_ids, torch.int64, device)])
    logits_indices = to_device([*range(num_verify_rows), *final_rows], torch.int64, device)
    inp = MixedInput(input_ids, md, num_verify_rows, torch.tensor(rows.num_drafts, dtype=torch.int64),
                     rows.draft_token_ids, rows.draft_probs, logits_indices,
                     to_device(prompt_rows, torch.int64, device)
                     if any(is_prompt_logprobs_due(c.request) for c in chunks) else None)
    return inp, ChunkRows(tuple(first_rows), tuple(prompt_targets), tuple(prompt_spans))
