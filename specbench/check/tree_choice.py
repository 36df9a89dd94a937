"""What a drafted tree must be, from first principles, given the drafter's law at each node (the tree oracle's
structural checks; written apart from speculation/tree/builder.py, which they judge).

The rule (issue 28, SGLang's EAGLE tree): a node's score is the sum of the log-probs along its branch. Step 0 creates
the root's top-k tokens as candidates; the k best candidates of a step form its frontier, which the next draft step
feeds; step s creates the top-k children of each frontier node of step s - 1. After `depth` steps the tree keeps the
`num_draft_tokens` best candidates of all steps. Hence:
- shape: parents precede children; siblings carry distinct tokens; only the root and fed nodes have children; each
  fed node's parent row is its parent's, and its draft-step mask shows exactly its ancestors and itself;
- choice: every fed frontier and the kept tree are the best of the candidates the laws define, and every child is
  among its parent's top-k: both up to `slack`, what the laws may be off by (near-ties may break either way).
"""

from __future__ import annotations

import torch

from specbench.speculation.draft_records import TreeRoundRecord

Branch = tuple[int, ...]  # drafter-vocabulary tokens from the root's child down to a node; () = the root


def node_branches(record: TreeRoundRecord) -> list[Branch] | None:
    """Each kept node's branch, or None when a parent does not precede its child."""
    branches: list[Branch] = []
    for i, (token, parent) in enumerate(zip(record.node_token_ids, record.parents)):
        if not -1 <= parent < i:
            return None
        branches.append((branches[parent] if parent >= 0 else ()) + (token,))
    return branches


def shape_errors(record: TreeRoundRecord) -> list[str]:
    """The tree's and the fed rows' shape (no laws needed)."""
    branches = node_branches(record)
    if branches is None:
        return [f"parents {list(record.parents)}: a parent must precede its child"]
    errors = []
    if len(set(branches)) != len(branches):
        errors.append(f"two kept siblings carry the same token (branches {branches})")
    fed = record.fed_branches
    row_of = {b: i for i, b in enumerate(fed)}
    if len(row_of) != len(fed):
        errors.append(f"a branch fed twice ({list(fed)})")
    for i, branch in enumerate(fed):
        ancestors = [branch[:j] for j in range(1, len(branch))]
        if any(a not in row_of for a in ancestors):
            errors.append(f"fed node {branch}: an ancestor was never fed")
            continue
        parent_row = row_of[branch[:-1]] if len(branch) > 1 else -1
        if record.fed_parent_rows[i] != parent_row:
            errors.append(f"fed node {branch} (row {i}): the draft step was handed parent row "
                          f"{record.fed_parent_rows[i]}, its parent is row {parent_row}")
        sees = tuple(sorted(row_of[a] for a in ancestors) + [i])
        if record.fed_sees[i] != sees:
            errors.append(f"fed node {branch} (row {i}): its draft-step mask sees rows {list(record.fed_sees[i])}, "
                          f"its branch is rows {list(sees)}")
    for branch in branches:
        if len(branch) > 1 and branch[:-1] not in row_of:
            errors.append(f"kept node {branch}: its parent was never fed (only fed nodes have children)")
    return errors


def choice_errors(record: TreeRoundRecord, laws: dict[Branch, torch.Tensor], slack: float) -> list[str]:
    """The fed frontiers and the kept tree against the top-k rule over `laws` (branch -> [V] log-probs at the root
    and every fed node). Assumes shape_errors found nothing."""
    k, errors = record.topk, []

    def score(branch: Branch) -> float:
        return sum(float(laws[branch[:j]][branch[j]]) for j in range(len(branch)))

    def is_top_k(branch: Branch) -> bool:  # the node's token is among its parent's k likeliest, up to slack
        law = laws[branch[:-1]]
        kth = float(law.topk(min(k, law.shape[0])).values[-1])
        return float(law[branch[-1]]) >= kth - slack

    def best(chosen: list[Branch], candidates: list[Branch], what: str) -> None:
        others = [c for c in candidates if c not in set(chosen)]
        if not chosen:
            return
        worst = min(chosen, key=score)
        rival = max(others, key=score, default=None)
        if rival is not None and score(rival) > score(worst) + slack:
            errors.append(f"{what}: kept {worst} (score {score(worst):.4g}) over {rival} (score {score(rival):.4g})")

    def children(parent: Branch) -> list[Branch]:
        law = laws[parent]
        return [parent + (t,) for t in law.topk(min(k, law.shape[0])).indices.tolist()]

    fed_by_depth = [[b for b in record.fed_branches if len(b) == d + 1] for d in range(record.depth)]
    candidates = children(())  # step 0: the root's top-k
    every = list(candidates)
    for d in range(record.depth - 1):  # frontier d was fed by draft step d + 1
        frontier = fed_by_depth[d]
        if len(frontier) != min(k, len(candidates)):
            errors.append(f"step {d}: {len(frontier)} nodes fed, the frontier has {min(k, len(candidates))}")
        errors += [f"fed node {b}: not among its parent's top-{k}" for b in frontier if not is_top_k(b)]
        best(frontier, candidates, f"frontier of step {d}")
        candidates = [c for parent in frontier for c in children(parent)]
        every += candidates
    kept = node_branches(record)
    expected = min(record.num_draft_tokens, len(every))
    if len(kept) != expected:
        errors.append(f"{len(kept)} nodes kept, the budget keeps {expected} of {len(every)} candidates")
    errors += [f"kept node {b}: not among its parent's top-{k}" for b in kept if not is_top_k(b)]
    best(kept, every, "kept tree")
    return errors
