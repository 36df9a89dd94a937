"""The target's exact next-token distributions along sampled sequences: dense forwards over a fresh, private KV
cache, warped by the checks' own numpy statement of temperature, top-k, top-p (never the sampling code under test)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from specbench.attention.metadata import build_metadata
from specbench.kv.kv_cache import KVCache
from specbench.sampling_params import SamplingParams
from specbench.check.warp_reference import warp


@torch.inference_mode()
def next_token_probs(
    model,  # a target DecoderLM (engine.runner.model of a clean, plain engine)
    prompts: list[tuple[int, ...]],  # [num_seqs] prompt token ids
    outputs: list[tuple[int, ...]],  # [num_seqs] sampled tokens, num_positions each
    params: SamplingParams,
    *,
    block_size: int,
    chunk_tokens: int = 8192,
) -> Iterator[torch.Tensor]:
    """Per chunk of sequences, [num_seqs_in_chunk, num_positions, vocab] float32 host probabilities that output
    token t of each sequence had, given its prompt and outputs 0..t-1. On the device the model's weights are on:
    never a config's device string, which may say `auto`."""
    device = next(model.parameters()).device
    num_positions = len(outputs[0])
    start = 0
    while start < len(prompts):
        end, size = start, 0
        while end < len(prompts) and (end == start or size + len(prompts[end]) + num_positions <= chunk_tokens):
            size += len(prompts[end]) + num_positions - 1
            end += 1
        yield _chunk_probs(model, prompts[start:end], outputs[start:end], params, block_size, device)
        start = end


def _chunk_probs(model, prompts, outputs, params: SamplingParams, block_size: int,
                 device: torch.device) -> torch.Tensor:
    seqs = [list(p) + list(o[:-1]) for p, o in zip(prompts, outputs)]  # the last output is predicted, never fed
    num_blocks = [math.ceil(len(s) / block_size) for s in seqs]
    cu_blocks = [0]
    for n in num_blocks:
        cu_blocks.append(cu_blocks[-1] + n)
    kv = KVCache(model.kv_cache_spec(), cu_blocks[-1], block_size, device)
    md = build_metadata(positions=[p for s in seqs for p in range(len(s))], num_query=[len(s) for s in seqs],
                        seq_lens=[len(s) for s in seqs],
                        block_tables=[list(range(cu_blocks[i], cu_blocks[i + 1])) for i in range(len(seqs))],
                        block_size=block_size, device=device)
    ids = torch.tensor([t for s in seqs for t in s], dtype=torch.int64, device=device)
    hidden = model(ids, md, kv, phase="oracle").hidden_states  # [num_tokens, H]
    rows, offset = [], 0
    for p, s in zip(prompts, seqs):
        rows.extend(range(offset + len(p) - 1, offset + len(s)))  # the rows predicting outputs 0..P-1
        offset += len(s)
    logits = model.compute_logits(hidden[torch.tensor(rows, device=device)])  # [num_seqs * P, vocab] fp32
    warped = warp(logits.double().cpu().numpy(), params.temperature, params.top_k, params.top_p)
    return torch.from_numpy(warped).float().view(len(seqs), len(outputs[0]), -1)
