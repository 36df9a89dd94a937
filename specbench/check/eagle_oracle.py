"""EAGLE draft oracle: each recorded step's logits vs the head recomputed from scratch on recomputed target features.

For a round whose newest committed token sits at position `newest`, the target features of positions
0..newest-1 are recomputed from the committed tokens by a cache-free target forward (target_features.py): the
features the engine captured while verifying and handed to the proposer are never trusted, so a wrong feature row
(another request's, a rejected draft's, one position off) shows. The head then runs from scratch (fresh KV,
positions 0..n-1) over the pairs (token p + 1, target feature p) for p < newest, then over its own chain:
(draft j, the head's own hidden of the previous row). Step 0 is the catch-up's last row; step j the j-th draft step.
"""

from __future__ import annotations

import torch

from specbench.check.fresh_forward import fresh_sequence
from specbench.check.target_features import TargetFeatureCache
from specbench.spec.draft_records import DraftStepRecord, group_rounds


@torch.inference_mode()
def _head_forward(proposer, ids: list[int], hidden: torch.Tensor):
    """The head over one sequence at positions 0..n-1 with a fresh, private KV cache. hidden: [n, H]."""
    md, kv = fresh_sequence(proposer.head.kv_cache_spec(), len(ids), proposer.block_size, proposer.device)
    return proposer.head(torch.tensor(ids, dtype=torch.int64, device=proposer.device), hidden, md, kv, phase="oracle")


@torch.inference_mode()
def recompute_eagle_logits(proposer, token_ids: tuple[int, ...], num_steps: int,
                           features: torch.Tensor) -> list[torch.Tensor]:
    """[num_steps] draft-vocab float32 logits of steps 0..num_steps-1 given these target features.

    token_ids: committed tokens then the num_steps - 1 drafts fed; features: [>= newest, feature_dim] (host).
    """
    head = proposer.head
    newest = len(token_ids) - num_steps  # position of the newest committed token
    ids = list(token_ids[1 : newest + 1])  # token p + 1 pairs with feature p
    feats = features[:newest].to(device=proposer.device, dtype=head.dtype)
    hidden = head.project_target_features(feats)  # [newest, H]
    logits = []
    for j in range(num_steps):
        out = _head_forward(proposer, ids, hidden)
        logits.append(head.compute_logits(out.logits_input[-1]).float().cpu())
        if j + 1 < num_steps:
            ids.append(token_ids[newest + 1 + j])  # draft j + 1
            hidden = torch.cat([hidden, out.hidden[-1:]])  # the head's own feature: no fc
    return logits


def compare_eagle_records(proposer, target_model, records: list[DraftStepRecord],
                          rtol: float) -> tuple[int, list[str]]:
    """(step records compared, mismatch descriptions); target_model: the engine's target DecoderLM."""
    cache = TargetFeatureCache(target_model, proposer.target_feature_layers, proposer.block_size, proposer.device)
    rounds = [(max(recs, key=lambda r: r.step), recs) for recs in group_rounds(records)]
    for longest, _ in rounds:  # features of positions 0..newest-1: every committed token but the newest
        cache.prime(longest.request_id, longest.token_ids[: len(longest.token_ids) - 1 - longest.step])
    bad: list[str] = []
    for longest, recs in rounds:
        newest = len(longest.token_ids) - 1 - longest.step
        features = cache.features(longest.request_id, longest.token_ids[:newest])
        ref_logits = recompute_eagle_logits(proposer, longest.token_ids, longest.step + 1, features)
        for rec in recs:
            ref = ref_logits[rec.step]
            err = (rec.logits - ref).abs().max().item()
            if err > rtol * max(1.0, ref.abs().max().item()):
                bad.append(f"{rec.request_id} step {rec.step} at position {newest - 1 + rec.step}: max |diff| {err:.3g}")
    return len(records), bad
