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

from specbench.speculation.synthetic.chain import conditional_rates
from specbench.speculation.tree.draft_tree import ROOT_PARENT, DraftTree, children_of, sibling_rank
from specbench.speculation.tree.padded import PaddedTree, all_along_path, output_tokens, pad_tree, path_of
from specbench.speculation.verify.tree import TreeVerifyResult

# The rank-1 child hits half as often as the rank-0 one would in its place (EAGLE-3's top-2 candidate is right
# ~10% of the time where top-1 is wrong at 0.73: 0.27 * 0.365 = 0.099).
DEFAULT_RANK_DECAY = 0.5
PUBLISHED_CHAIN_RATES = (0.73, 0.52, 0.35)  # Llama-3.1-8B + EAGLE-3, MT-Bench, k = 3 (speculation/synthetic/chain.py)
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
    from specbench.speculation.tree.builder import TopKTreeBuilder

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
    target_logits: torch.Tensor,  # [total_rows, V], rows laid out as tree.cu_num_rows (verify.tree.verify_tree)
    tree: DraftTree,
    conditional: torch.Tensor,  # [max_depth, max_rank] float32 on the logits' device (tree_table)
    generator: torch.Generator | None = None,
    padded: PaddedTree | None = None,  # pad_tree(tree, the widest request's node count); None: built here
) -> TreeVerifyResult:
    """Accept one root-to-node path per request by the forced law of the module docstring; the next token is the
    target's argmax at the path's last row. Pure: same inputs and generator state, same result.

    Coins: one torch.rand(num_reqs, width) call, width = the widest request (node i of request r reads coin
    [r, i]). With `padded` nothing reads the device and accepted_nodes is padded.width wide; without, the widest
    request and the deepest path are read (two syncs) and accepted_nodes is as wide as the deepest tree,
    verify_tree's layout."""
    device = target_logits.device
    if target_logits.dim() != 2:
        raise ValueError(f"target_logits must be [total_rows, V], got {tuple(target_logits.shape)}")
    if padded is None:
        total_rows = int(tree.cu_num_rows[-1])
        if target_logits.shape[0] != total_rows:
            raise ValueError(f"target_logits must be [{total_rows}, V], got {tuple(target_logits.shape)}")
        padded = pad_tree(tree)
        path_width = int(tree.depth.max()) + 1 if tree.depth.numel() else 0
    else:
        path_width = padded.width
    coins = torch.rand(tree.num_reqs, padded.width, device=device, generator=generator)
    path = path_of(padded, all_along_path(padded, first_hits(padded, conditional, coins)), path_width)
    # only the stop rows' argmax (the root's row is first_row): num_reqs rows, not every tree row
    final = target_logits[padded.first_row + 1 + path.last_node].argmax(dim=-1)
    return TreeVerifyResult(accepted_nodes=path.accepted_nodes, num_accepted=path.num_accepted,
                            output_token_ids=output_tokens(padded, path, final))


def first_hits(tree: PaddedTree, conditional: torch.Tensor, coins: torch.Tensor) -> torch.Tensor:
    """[num_reqs, width] bool: the node's coin hits its (depth, rank) rate and no earlier sibling's does (children
    are tried in rank order; the first hit is the one that counts)."""
    max_depth, max_rank = conditional.shape
    in_table = tree.is_node & (tree.depth < max_depth) & (tree.rank < max_rank)
    rate = torch.where(in_table, conditional[tree.depth.clamp_max(max_depth - 1), tree.rank.clamp_max(max_rank - 1)],
                       0.0)
    is_hit = coins < rate
    return is_hit & ~(tree.is_earlier_sibling & is_hit[:, None, :]).any(dim=2)


def synthetic_tree_walk(
    target_logits: torch.Tensor,  # [total_rows, V]
    tree: DraftTree,
    conditional: torch.Tensor,  # [max_depth, max_rank]
    coins: torch.Tensor,  # [num_reqs, >= num_nodes of each request] node i of request r reads coins[r, i]
) -> tuple[list[list[int]], list[int]]:
    """The readable reference of synthetic_tree_verify: per request, from the root, try the children in rank order
    and step to the first whose coin hits table[depth, rank]. (accepted paths, the target argmax after each)."""
    argmax = target_logits.argmax(dim=-1).tolist()
    cu_rows = tree.cu_num_rows.tolist()
    paths, finals = [], []
    for req in range(tree.num_reqs):
        parents = tree.parents_of(req)
        children, ranks = children_of(parents), sibling_rank(parents)
        node, path = ROOT_PARENT, []
        while True:
            depth = len(path)
            hit = next((c for c in children[node]
                        if float(coins[req, c]) < table_entry(conditional, depth, ranks[c])), None)
            if hit is None:
                break
            path.append(hit)
            node = hit
        paths.append(path)
        finals.append(argmax[cu_rows[req] + 1 + node])
    return paths, finals
