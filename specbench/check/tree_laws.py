"""The drafter's law at every node of a recorded tree round, recomputed cache-free along each node's branch alone.

A node's law is the drafter's distribution given the committed tokens followed by the node's branch (the tokens from
the root's child down to it): exactly what a chain drafting that branch computes. So each branch is recomputed as a
chain, with the chain oracles' cache-free forwards (a fresh private KV, causal attention over one sequence): no tree
mask, no tree rows, nothing a tree draft step ran. The committed prefix is computed once per round; a run along a
branch gives the laws of all its prefixes, so only the fed branches no other fed branch extends are run.
- draft LM: a dense prefill over the committed tokens, then the branch's tokens after them; the law is the
  log-softmax over the target's ids (the drafter ranks children there: speculation/drafters/draft_model.py).
- EAGLE / EAGLE-3 / one-module MTP: the head over the target features of the committed prefix, then its chain along
  the branch, one query per node fed the head's own previous hidden (check/eagle_oracle.py's building blocks), over
  the head's draft vocabulary.
"""

from __future__ import annotations

import torch

from specbench.check.eagle_oracle import eagle_chain_step, eagle_prefix
from specbench.check.fresh_forward import fresh_cache, query_metadata
from specbench.speculation.draft_records import TreeRoundRecord

Branch = tuple[int, ...]  # drafter-vocabulary tokens from the root's child down to a node; () = the root


def branches_to_run(record: TreeRoundRecord) -> list[Branch]:
    """The fed branches no other fed branch extends (the root alone when nothing was fed)."""
    fed = set(record.fed_branches)
    extended = {b[:i] for b in fed for i in range(len(b))}
    leaves = sorted(fed - extended)
    return leaves or [()]


@torch.inference_mode()
def draft_lm_laws(proposer, record: TreeRoundRecord) -> dict[Branch, torch.Tensor]:
    """branch -> [target_vocab] float32 log-probs of the draft LM (the reference proposer's model): one dense pass
    over the committed tokens, then per branch its tokens at the positions after them (causal: each query sees the
    committed keys and its own branch's, a later branch overwriting an earlier one's)."""
    model, vocab, committed = proposer.model, proposer.target_vocab_size, record.token_ids
    leaves = branches_to_run(record)
    n, device, block_size = len(committed), proposer.device, proposer.block_size
    kv, table = fresh_cache(model.kv_cache_spec(), n + max(map(len, leaves)), block_size, device)

    def laws_of(first: int, token_ids: tuple[int, ...]) -> torch.Tensor:  # [len(token_ids), vocab] log-probs
        ids = torch.tensor(token_ids, dtype=torch.int64, device=device)
        out = model(ids, query_metadata(first, len(token_ids), table, block_size, device), kv, phase="oracle")
        return torch.log_softmax(model.compute_logits(out.hidden_states).float().cpu()[:, :vocab], dim=-1)

    laws = {(): laws_of(0, committed)[-1]}
    for leaf in leaves:
        if leaf:
            rows = laws_of(n, leaf)
            laws.update({leaf[: j + 1]: rows[j] for j in range(len(leaf))})
    return laws


@torch.inference_mode()
def eagle_laws(proposer, record: TreeRoundRecord, features: torch.Tensor) -> dict[Branch, torch.Tensor]:
    """branch -> [draft_vocab] float32 log-probs of the head (the reference proposer's), given the target features
    [>= newest, feature_dim] of the committed positions 0 .. newest - 1 (recomputed: check/target_features.py): its
    dense pass over the committed pairs, then per branch its chain, one query per node (check/eagle_oracle.py)."""
    head, newest = proposer.head, len(record.token_ids) - 1
    leaves = branches_to_run(record)
    kv, table, prefix_out = eagle_prefix(proposer, record.token_ids, features, max(map(len, leaves)))

    def law(out) -> torch.Tensor:
        return torch.log_softmax(head.compute_logits(out.logits_input[-1]).float().cpu(), dim=-1)

    laws = {(): law(prefix_out)}
    for leaf in leaves:
        target_ids = head.to_target_ids(torch.tensor(leaf, dtype=torch.int64, device=proposer.device)).tolist()
        out = prefix_out
        for j, token_id in enumerate(target_ids):  # node leaf[: j + 1] at position newest + j
            out = eagle_chain_step(proposer, kv, table, newest + j, token_id, out.hidden[-1:])
            laws[leaf[: j + 1]] = law(out)
    return laws
