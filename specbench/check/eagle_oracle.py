"""EAGLE draft oracle: each recorded step's logits vs a fresh dense forward of the head.

For a round whose newest committed token sits at position `newest`, the head is run from scratch (fresh KV,
positions 0..n-1) over the pairs (token p + 1, target feature p) for p < newest, then over its own chain:
(draft j, the head's own hidden of the previous row). Step 0 is the catch-up's last row; step j the j-th draft step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from specbench.attention.metadata import build_metadata
from specbench.kv.kv_cache import KVCache
from specbench.spec.draft_records import DraftStepRecord, TargetFeatureRecord


@dataclass
class _Round:
    features: torch.Tensor  # [num_known, feature_dim] the request's target features when the round began
    records: list[DraftStepRecord] = field(default_factory=list)


@torch.inference_mode()
def _dense_forward(proposer, ids: list[int], hidden: torch.Tensor):
    """The head over one sequence at positions 0..n-1 with a fresh, private KV cache. hidden: [n, H]."""
    n, block_size = len(ids), proposer.block_size
    num_blocks = math.ceil(n / block_size)
    kv = KVCache(proposer.head.kv_cache_spec(), num_blocks, block_size, proposer.device)
    md = build_metadata(positions=list(range(n)), num_query=[n], seq_lens=[n], block_tables=[list(range(num_blocks))],
                        block_size=block_size, device=proposer.device)
    return proposer.head(torch.tensor(ids, dtype=torch.int64, device=proposer.device), hidden, md, kv, phase="oracle")


@torch.inference_mode()
def recompute_eagle_logits(proposer, token_ids: tuple[int, ...], num_steps: int,
                           features: torch.Tensor) -> list[torch.Tensor]:
    """[num_steps] draft-vocab float32 logits of steps 0..num_steps-1.

    token_ids: committed tokens then the num_steps - 1 drafts fed; features: [>= newest, feature_dim] (host).
    """
    head = proposer.head
    newest = len(token_ids) - num_steps  # position of the newest committed token
    ids = list(token_ids[1 : newest + 1])  # token p + 1 pairs with feature p
    feats = features[:newest].to(device=proposer.device, dtype=head.dtype)
    hidden = head.project_target_features(feats)  # [newest, H]
    logits = []
    for j in range(num_steps):
        out = _dense_forward(proposer, ids, hidden)
        logits.append(head.compute_logits(out.logits_input[-1]).float().cpu())
        if j + 1 < num_steps:
            ids.append(token_ids[newest + 1 + j])  # draft j + 1
            hidden = torch.cat([hidden, out.hidden[-1:]])  # the head's own feature: no fc
    return logits


def _rounds(records) -> list[_Round]:
    """Replays feature records in order; a step-0 record opens a request's round."""
    known: dict[str, torch.Tensor] = {}
    current: dict[str, _Round] = {}
    rounds: list[_Round] = []
    for rec in records:
        if isinstance(rec, TargetFeatureRecord):
            prev = known.get(rec.request_id)
            kept = prev[: rec.start] if prev is not None else rec.features[:0]
            known[rec.request_id] = torch.cat([kept, rec.features])  # a restart (preemption) truncates
        elif rec.step == 0 or rec.request_id not in current:
            current[rec.request_id] = _Round(known.get(rec.request_id, torch.empty(0)), [rec])
            rounds.append(current[rec.request_id])
        else:
            current[rec.request_id].records.append(rec)
    return rounds


def compare_eagle_records(proposer, records, rtol: float) -> tuple[int, list[str]]:
    """(step records compared, mismatch descriptions)."""
    bad: list[str] = []
    num = 0
    for rnd in _rounds(records):
        longest = max(rnd.records, key=lambda r: r.step)
        newest = len(longest.token_ids) - 1 - longest.step
        if rnd.features.shape[0] < newest:
            bad.extend(f"{r.request_id} step {r.step}: target features known only for {rnd.features.shape[0]} "
                       f"of {newest} committed positions" for r in rnd.records)
            num += len(rnd.records)
            continue
        ref_logits = recompute_eagle_logits(proposer, longest.token_ids, longest.step + 1, rnd.features)
        for rec in rnd.records:
            num += 1
            ref = ref_logits[rec.step]
            err = (rec.logits - ref).abs().max().item()
            if err > rtol * max(1.0, ref.abs().max().item()):
                bad.append(f"{rec.request_id} step {rec.step} at position {newest - 1 + rec.step}: max |diff| {err:.3g}")
    return num, bad
