"""The draft LM's cache-free recomputation (the chain and tree oracles'): one fresh prefill over a token sequence."""

from __future__ import annotations

import torch

from specbench.check.fresh_forward import fresh_sequence


@torch.inference_mode()
def recompute_draft_logits(proposer, token_ids: tuple[int, ...]) -> torch.Tensor:
    """[len(token_ids), vocab] float32 logits of the draft LM over token_ids with a fresh, private KV cache."""
    md, kv = fresh_sequence(proposer.model.kv_cache_spec(), len(token_ids), proposer.block_size, proposer.device)
    ids = torch.tensor(token_ids, dtype=torch.int64, device=proposer.device)
    out = proposer.model(ids, md, kv, phase="oracle")
    return proposer.model.compute_logits(out.hidden_states).float().cpu()
