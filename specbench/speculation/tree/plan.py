"""What a tree round drafts: its shape from the run's DraftShape and k, and the positions it reaches.

`TreePlan`: tree depth = k draft steps; node budget `num_draft_tokens`, default every candidate the steps create (as
DraftShape defines None). KV a tree round writes beyond the newest committed token (`kv_rows`): the target's verify
stores the root and `num_draft_tokens` nodes at newest .. newest + num_draft_tokens; the drafter's tree rows
(propose.py) reach prefix - 1 + (depth - 1) * topk, prefix being newest + 1 (draft LM) or newest (EAGLE/MTP).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.speculation.draft_shape import DraftShape


@dataclass(frozen=True, slots=True)
class TreePlan:
    topk: int  # children per frontier node and frontier size per step
    depth: int  # draft steps, = the deepest a path can go (<= k)
    num_draft_tokens: int  # nodes kept per request (the root excluded)


def max_nodes(topk: int, depth: int) -> int:
    """Candidates a TopKTreeBuilder creates in `depth` steps: topk on the root, then topk * topk per step."""
    return topk + (depth - 1) * topk * topk if depth > 0 else 0


def tree_plan(shape: DraftShape, num_steps: int) -> TreePlan:
    every = max_nodes(shape.eagle_topk, num_steps)
    budget = every if shape.num_draft_tokens is None else min(shape.num_draft_tokens, every)
    return TreePlan(shape.eagle_topk, num_steps, budget)


def kv_rows(plan: TreePlan) -> int:
    """KV positions after the newest committed token a tree round of `plan` may write (target or drafter)."""
    return max(plan.num_draft_tokens, (plan.depth - 1) * plan.topk)


def tree_reach(plan: TreePlan) -> int:
    """Positions past a drafter's committed prefix its tree draft steps reach: RoPE positions up to depth - 1,
    stored tree rows up to (depth - 1) * topk (the bound of the steps' max_seq_len)."""
    return max(plan.depth, (plan.depth - 1) * plan.topk)
