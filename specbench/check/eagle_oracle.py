"""EAGLE draft oracle: each recorded step's logits vs the head recomputed from scratch on recomputed target features.

For a round whose newest committed token sits at position `newest`, the target features of positions
0..newest-1 are recomputed from the committed tokens by a cache-free target forward (target_features.py): the
features the engine captured while verifying and handed to the proposer are never trusted, so a wrong feature row
(another request's, a rejected draft's, one position off) shows. The head then runs from scratch (a fresh, private
KV filled by one dense pass at positions 0..newest-1) over the pairs (token p + 1, target feature p) for p < newest,
then over its own chain, one query per step: (draft j, the head's own hidden of the previous row). Step 0 is the
catch-up's last row; step j the j-th draft step.
"""

from __future__ import annotations

import torch

from specbench.check.fresh_forward import fresh_cache, query_metadata
from specbench.check.target_features import TargetFeatureCache
from specbench.speculation.draft_records import DraftStepRecord, group_rounds
from specbench.speculation.drafters.mtp.multi_module import MultiModuleMtpProposer


def eagle_prefix(proposer, committed: tuple[int, ...], features: torch.Tensor, num_extra: int):
    """(kv, block table, head output) of the head's dense pass over the committed pairs (token p + 1, feature p),
    p < newest = len(committed) - 1, into a fresh private cache with room for `num_extra` chained steps after it;
    the output's last row is step 0 (the catch-up's last row). features: [>= newest, feature_dim] (host)."""
    head, device, block_size = proposer.head, proposer.device, proposer.block_size
    newest = len(committed) - 1
    kv, table = fresh_cache(head.kv_cache_spec(), newest + num_extra, block_size, device)
    ids = torch.tensor(committed[1 : newest + 1], dtype=torch.int64, device=device)  # token p + 1 pairs with feature p
    hidden = head.project_target_features(features[:newest].to(device=device, dtype=head.dtype))  # [newest, H]
    out = head(ids, hidden, query_metadata(0, newest, table, block_size, device), kv, phase="oracle")
    return kv, table, out


def eagle_chain_step(proposer, kv, table: list[int], position: int, token_id: int, hidden: torch.Tensor):
    """The head's output for one chained query at `position`: (token_id, hidden [1, H] = the head's own hidden of
    the previous row), seeing keys 0 .. position of the private cache (later keys, if written, stay unseen)."""
    device = proposer.device
    draft = torch.tensor([token_id], dtype=torch.int64, device=device)
    md = query_metadata(position, 1, table, proposer.block_size, device)
    return proposer.head(draft, hidden, md, kv, phase="oracle")


@torch.inference_mode()
def recompute_eagle_logits(proposer, token_ids: tuple[int, ...], num_steps: int,
                           features: torch.Tensor) -> list[torch.Tensor]:
    """[num_steps] draft-vocab float32 logits of steps 0..num_steps-1 given these target features.

    token_ids: committed tokens then the num_steps - 1 drafts fed; features: [>= newest, feature_dim] (host).
    One dense pass over the committed pairs into a fresh private cache, then one query per chained step on it.
    """
    head = proposer.head
    newest = len(token_ids) - num_steps  # position of the newest committed token
    kv, table, out = eagle_prefix(proposer, token_ids[: newest + 1], features, num_steps - 1)
    logits = [head.compute_logits(out.logits_input[-1]).float().cpu()]
    for j in range(1, num_steps):  # draft j at position newest - 1 + j, fed the head's own previous hidden
        out = eagle_chain_step(proposer, kv, table, newest - 1 + j, token_ids[newest + j], out.hidden[-1:])
        logits.append(head.compute_logits(out.logits_input[-1]).float().cpu())
    return logits


@torch.inference_mode()
def recompute_mtp_chain_logits(proposer, token_ids: tuple[int, ...], num_steps: int,
                               features: torch.Tensor) -> list[torch.Tensor]:
    """Several MTP modules (speculation/drafters/mtp/multi_module.py), recomputed the way transformers' MtpModel runs
    them: each module m < min(num_steps, num_modules) in one dense pass over the whole sequence, positions
    0 .. newest - 1 + m, token q + 1 and module m - 1's output at q - 1 at position q (the target's hidden at q for
    module 0; zero at q = 0); step m is its last row. Steps past the module count chain one query each on the last
    module's pass. Fresh caches, nothing the engine wrote."""
    modules, device, block_size = proposer.modules, proposer.device, proposer.block_size
    newest = len(token_ids) - num_steps
    kv, table = fresh_cache(modules[0].kv_cache_spec(), newest + num_steps - 1, block_size, device)
    logits: list[torch.Tensor] = []
    previous = None  # [num_positions, H] the last module pass's outputs over positions 0 ..
    out = None
    for m in range(min(num_steps, len(modules))):
        num_positions = newest + m
        ids = torch.tensor(token_ids[1 : num_positions + 1], dtype=torch.int64, device=device)
        if m == 0:
            hidden = features[:newest].to(device=device, dtype=modules[0].dtype)
        else:
            hidden = torch.cat([previous.new_zeros(1, previous.shape[-1]), previous[: num_positions - 1]])
        out = modules[m](ids, hidden, query_metadata(0, num_positions, table, block_size, device), kv,
                         phase="oracle")
        logits.append(modules[m].compute_logits(out.logits_input[-1]).float().cpu())
        previous = out.hidden
    for j in range(len(modules), num_steps):  # the last module reused, fed its own previous output
        draft = torch.tensor([token_ids[newest + j]], dtype=torch.int64, device=device)
        md = query_metadata(newest - 1 + j, 1, table, block_size, device)
        out = modules[-1](draft, out.hidden[-1:], md, kv, phase="oracle")
        logits.append(modules[-1].compute_logits(out.logits_input[-1]).float().cpu())
    return logits


def compare_eagle_records(proposer, target_model, records: list[DraftStepRecord],
                          rtol: float) -> tuple[int, list[str]]:
    """(step records compared, mismatch descriptions); target_model: the engine's target DecoderLM."""
    cache = TargetFeatureCache(target_model, proposer.target_feature_layers, proposer.block_size, proposer.device)
    rounds = [(max(recs, key=lambda r: r.step), recs) for recs in group_rounds(records)]
    needed: dict[str, tuple[int, ...]] = {}  # request -> its longest committed tokens but the newest
    for longest, _ in rounds:  # a round needs the features of positions 0..newest-1
        tokens = longest.token_ids[: len(longest.token_ids) - 1 - longest.step]
        if len(tokens) > len(needed.get(longest.request_id, ())):
            needed[longest.request_id] = tokens
    for request_id, tokens in needed.items():  # one target forward per request serves all its rounds
        cache.prime(request_id, tokens)
    bad: list[str] = []
    for longest, recs in rounds:
        newest = len(longest.token_ids) - 1 - longest.step
        features = cache.features(longest.request_id, longest.token_ids[:newest])
        recompute = recompute_mtp_chain_logits if isinstance(proposer, MultiModuleMtpProposer) else \
            recompute_eagle_logits
        ref_logits = recompute(proposer, longest.token_ids, longest.step + 1, features)
        for rec in recs:
            ref = ref_logits[rec.step]
            err = (rec.logits - ref).abs().max().item()
            # A step feeds the head its own previous output: rounding compounds along the chain, so the
            # tolerance grows with the step (step 0 keeps rtol; a wrong input moves the logits by O(1), far above).
            if err > rtol * (1 + rec.step) * max(1.0, ref.abs().max().item()):
                position = newest - 1 + rec.step
                bad.append(f"{rec.request_id} step {rec.step} at position {position}: max |diff| {err:.3g}")
    return len(records), bad
