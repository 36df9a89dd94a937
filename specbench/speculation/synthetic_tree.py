"""Synthetic acceptance for tree drafts: forced per-(depth, rank) acceptance (performance work, NOT lossless).

Definition. A table `conditional[d, r]` (depth d = 0 for the root's children, rank r among siblings in node
order, 0 = the drafter's best) gives the probability that the rank-r child of a node on the true path is the
true token, given that the node is on the path and none of its lower-ranked drafted children was:
    P(the true token is the rank-r child at depth d) = conditional[d, r] * prod_{s < r} (1 - conditional[d, s]).
Each node's children are tried in rank order; the first hit joins the path; a node none of whose drafted
children hits ends it, and the next token is the target's argmax at that node's row (as `synthetic_verify`
takes it at the stop row of a chain). Depths and ranks past the table's edges never hit.

`tree_table(rates, rank_decay)` derives the table from the chain's per-position rates (`--synthetic-acceptance`,
unconditional p_1 >= p_2 >= ...: `synthetic.conditional_rates` turns them into the chain's conditional c_d)
with a geometric decay over ranks: conditional[d, r] = c_{d+1} * rank_decay ** r. Rank 0 is the chain's own
draft, so a chain (topk 1) accepts exactly as `synthetic_verify` does with the same rates; rank_decay = 0 turns
every tree into its rank-0 chain.

Calibration (tests/speculation/test_synthetic_tree.py checks the numbers). SGLang's published Llama-3.1-8B
setting (MT-Bench, one H100, 158 -> 373 tok/s; docs.sglang.io "Speculative Decoding", whose defaults are
--speculative-num-steps 5, --speculative-eagle-topk 4, --speculative-num-draft-tokens 8) accepts about 3.5 to 4
tokens a round; the EAGLE-3 support PR (sgl-project/sglang#4247) measured acceptance length 4.68 at 5 steps and
5.39 at 8 steps on MT-Bench (EAGLE-2: 3.76), with wider trees than the default 8 tokens. `expected_tree` grows
the tree TopKTreeBuilder drafts when the drafter's scores follow this law; at topk 4 / 8 tokens / 5 steps:
- SGLANG_SETTING_RATES (the chain's conditional rate 0.8 at every depth: 0.8, 0.64, 0.512, ...) with
  DEFAULT_RANK_DECAY accept 3.90 tokens a round (drafts + the bonus), in the published range; the 5-deep chain
  at these rates accepts 3.69, the k = 3 chain 2.95;
- the chain's published k = 3 rates (0.73, 0.52, 0.35, extended at their last conditional rate) accept 3.24.
"""

from __future__ import annotations

import torch

from specbench.speculation.synthetic import conditional_rates
from specbench.speculation.tree import ROOT_PARENT, DraftTree, children_of, sibling_rank
from specbench.speculation.tree_verifier import PLACEHOLDER_TOKEN_ID, TreeVerifyResult

# The rank-1 child hits half as often as the rank-0 one would in its place (EAGLE-3's top-2 candidate is right
# ~10% of the time where top-1 is wrong at 0.73: 0.27 * 0.365 = 0.099).
DEFAULT_RANK_DECAY = 0.5
PUBLISHED_CHAIN_RATES = (0.73, 0.52, 0.35)  # Llama-3.1-8B + EAGLE-3, MT-Bench, k = 3 (speculation/synthetic.py)
SGLANG_SETTING_RATES = (0.8, 0.64, 0.512, 0.4096, 0.32768)  # conditional 0.8 at every depth (module docstring)
SGLANG_SETTING = (4, 8, 5)  # (topk, num_draft_tokens, num_steps): SGLang's defaults


def extend_rates(rates: tuple[float, ...], num_positions: int) -> tuple[float, ...]:
    """Unconditional rates for `num_positions` positions: past the given ones, the last conditional rate repeats."""
    cond = conditional_rates(rates)
    out = list(rates)
    while len(out) < num_positions:
        out.append(out[-1] * cond[-1])
    return tuple(out[:num_positions])


def tree_table(rates: tuple[float, ...], max_rank: int, rank_decay: float = DEFAULT_RANK_DECAY) -> torch.Tensor:
    """[len(rates), max_rank] float32: conditional[d, r] = c_{d+1} * rank_decay ** r (module docstring)."""
    if not 0.0 <= rank_decay <= 1.0:
        raise ValueError(f"rank_decay must be in [0, 1], got {rank_decay}")
    cond = torch.tensor(conditional_rates(rates), dtype=torch.float64)
    decay = rank_decay ** torch.arange(max_rank, dtype=torch.float64)
    return (cond[:, None] * decay[None, :]).clamp(0.0, 1.0).float()


def engine_table(rates: tuple[float, ...], max_depth: int, topk: int, rank_decay: float = DEFAULT_RANK_DECAY,
                 device: torch.device | str = "cpu") -> torch.Tensor:
    """[max_depth, topk] the table an engine drafting trees of that shape verifies against, from its
    --synthetic-acceptance rates (fewer rates than depths: extend_rates)."""
    return tree_table(extend_rates(rates, max_depth), topk, rank_decay).to(device)


def table_entry(table: torch.Tensor, depth: int, rank: int) -> float:
    """conditional[depth, rank], 0 past the table's edges."""
    return float(table[depth, rank]) if depth < table.shape[0] and rank < table.shape[1] else 0.0


def expected_acceptance_length(parents: list[int], table: torch.Tensor) -> float:
    """E[accepted drafts + 1] of one request's tree under the law of the module docstring (exact)."""
    children = children_of(parents)
    ranks = sibling_rank(parents)

    def expected_below(node: int, depth: int) -> float:  # expected accepted nodes below `node`, it being accepted
        total, reach = 0.0, 1.0
        for child in children[node]:
            hit = reach * table_entry(table, depth, ranks[child])
            total += hit * (1.0 + expected_below(child, depth + 1))
            reach -= hit
        return total

    return 1.0 + expected_below(ROOT_PARENT, 0)


def expected_tree(table: torch.Tensor, topk: int, num_draft_tokens: int, num_steps: int) -> list[int]:
    """The parents of the tree TopKTreeBuilder grows from a drafter whose rank-r child at depth d has log-prob
    log P(the true token is the rank-r child at depth d): the shape synthetic speed rows meet when the dummy
    drafter's scores follow this law (used for calibration only)."""
    from specbench.speculation.tree_builder import TopKTreeBuilder

    builder = TopKTreeBuilder(1, topk, num_draft_tokens)
    for depth in range(num_steps):
        num_frontier = 1 if builder.frontier is None else builder.frontier.token_ids.shape[1]
        reach, probs = 1.0, []
        for rank in range(topk):
            hit = reach * table_entry(table, depth, rank)
            probs.append(max(hit, 1e-30))
            reach -= hit
        log_probs = torch.full((1, num_frontier, topk + 1), -1e4)
        log_probs[:, :, :topk] = torch.tensor(probs).log()
        builder.expand(log_probs)
    return builder.finish().parents_of(0)


def synthetic_tree_verify(
    target_logits: torch.Tensor,  # [total_rows, V], rows laid out as tree.cu_num_rows (tree_verifier.verify_tree)
    tree: DraftTree,
    conditional: torch.Tensor,  # [max_depth, max_rank] float32 on the logits' device (tree_table)
    generator: torch.Generator | None = None,
) -> TreeVerifyResult:
    """Accept one root-to-node path per request by the forced law of the module docstring; the next token is the
    target's argmax at the path's last row. Pure: same inputs and generator state, same result. On the device
    throughout except one read of the widest request (the padded layout's width)."""
    device = target_logits.device
    num_reqs = tree.num_reqs
    total_rows = int(tree.cu_num_rows[-1])
    if target_logits.dim() != 2 or target_logits.shape[0] != total_rows:
        raise ValueError(f"target_logits must be [{total_rows}, V], got {tuple(target_logits.shape)}")
    num_nodes = tree.num_nodes.to(device)
    width = int(num_nodes.max()) if num_reqs else 0
    slot = torch.arange(width, device=device)
    is_node = slot[None, :] < num_nodes[:, None]  # [num_reqs, width]
    flat = (tree.cu_num_nodes[:-1].to(device)[:, None] + slot[None, :]).clamp_max(max(tree.token_ids.numel() - 1, 0))

    def padded(x: torch.Tensor, fill: int) -> torch.Tensor:  # [total_nodes] -> [num_reqs, width]
        if x.numel() == 0:
            return torch.full((num_reqs, width), fill, dtype=torch.int64, device=device)
        return torch.where(is_node, x.to(device)[flat], fill)

    parent = padded(tree.parent, -2)  # -2: padding, never a parent
    depth = padded(tree.depth, 0)
    tokens = padded(tree.token_ids, PLACEHOLDER_TOKEN_ID)
    # rank: earlier nodes with the same parent (ranks follow node order, tree.sibling_rank)
    is_earlier = slot[None, :, None] > slot[None, None, :]  # [1, i, j]: j < i
    is_sibling = (parent[:, :, None] == parent[:, None, :]) & is_earlier & is_node[:, None, :]
    rank = is_sibling.sum(dim=2)
    max_depth, max_rank = conditional.shape
    in_table = is_node & (depth < max_depth) & (rank < max_rank)
    rate = torch.where(in_table, conditional[depth.clamp_max(max_depth - 1), rank.clamp_max(max_rank - 1)], 0.0)
    coins = torch.rand(num_reqs, width, device=device, generator=generator)
    is_hit = coins < rate
    # The first hit among a node's children (in rank order) is the one that counts.
    is_first_hit = is_hit & ~(is_sibling & is_hit[:, None, :]).any(dim=2)
    is_accepted = torch.zeros_like(is_hit)
    parent_index = parent.clamp_min(0)
    for _ in range(width):  # a path is at most `width` deep; each pass settles one more level
        is_parent_ok = (parent == ROOT_PARENT) | is_accepted.gather(1, parent_index)
        is_accepted = is_first_hit & is_parent_ok & is_node
    num_accepted = is_accepted.sum(dim=1)  # [num_reqs]
    tree_depth = int(tree.depth.max()) + 1 if tree.depth.numel() else 0
    if tree_depth == 0:  # no request drafted: the bonus token alone
        final = target_logits.argmax(dim=-1)[tree.cu_num_rows[:-1].to(device)]
        empty = torch.empty(num_reqs, 0, dtype=torch.int64, device=device)
        return TreeVerifyResult(accepted_nodes=empty, num_accepted=num_accepted, output_token_ids=final[:, None])
    level = torch.arange(tree_depth, device=device)
    # accepted_nodes[r, d]: the accepted node at depth d (one per depth on a path), -1 past the path
    at_level = is_accepted[:, None, :] & (depth[:, None, :] == level[None, :, None])  # [num_reqs, depth, width]
    accepted_nodes = torch.where(at_level.any(dim=2), at_level.long().argmax(dim=2), PLACEHOLDER_TOKEN_ID)
    last_node = torch.where(num_accepted > 0, accepted_nodes.gather(1, (num_accepted - 1).clamp_min(0)[:, None])[:, 0],
                            ROOT_PARENT)
    stop_row = tree.cu_num_rows[:-1].to(device) + 1 + last_node  # the root's row is cu_num_rows[r]
    final = target_logits.argmax(dim=-1)[stop_row]  # [num_reqs]
    path_tokens = torch.where(accepted_nodes >= 0, tokens.gather(1, accepted_nodes.clamp_min(0)), PLACEHOLDER_TOKEN_ID)
    output = torch.nn.functional.pad(path_tokens, (0, 1), value=PLACEHOLDER_TOKEN_ID)
    output = output.scatter(1, num_accepted[:, None], final[:, None])
    return TreeVerifyResult(accepted_nodes=accepted_nodes, num_accepted=num_accepted, output_token_ids=output)
