"""The metrics check's tree part: a request's tree counts (speculation/verify/tree_stats.py, merged per request)
against its own raw records, from the definitions alone: every tree round is one draft round with one acceptance
length and one tree size; the lengths add up to the accepted tokens, the sizes to the drafted ones; the path reaches
depth d in exactly the rounds whose length exceeds d (the per-depth and per-position counters); a rank is accepted
once per accepted node; and nothing is accepted that was not offered. Chain requests (no tree counts) have nothing to
check."""

from __future__ import annotations

from specbench.engine.outputs import RequestOutput


def tree_count_violations(outs: list[RequestOutput]) -> tuple[str, ...]:
    problems = []
    for i, out in enumerate(outs):
        s, tree = out.stats, out.stats.tree_counts
        if tree is None:
            continue
        lengths = list(tree.acceptance_lengths)
        depths = [sum(n > d for n in lengths) for d in range(max(lengths, default=0))]
        facts = {
            "tree rounds == draft rounds": (tree.num_rounds, len(lengths), len(tree.tree_sizes), s.num_draft_rounds),
            "sum of acceptance lengths == accepted tokens": (sum(lengths), tree.num_accepted, s.num_accepted_tokens),
            "acceptance lengths == accepted per round": (lengths, list(s.accepted_per_round)),
            "sum of tree sizes == drafted tokens": (sum(tree.tree_sizes), tree.num_nodes, s.num_draft_tokens),
            "accepted per depth == rounds longer than the depth": (_trimmed(tree.accepted_per_depth), depths),
            "accepted per position == accepted per depth": (_trimmed(s.num_accepted_per_pos), depths),
            "accepted per rank adds up to the accepted tokens": (sum(tree.accepted_per_rank), sum(lengths)),
        }
        problems += [f"request {i}: {fact}: {' vs '.join(map(str, values))}" for fact, values in facts.items()
                     if any(v != values[0] for v in values[1:])]
        over = [f"{kind} {j}" for kind, accepted, offered in (("depth", tree.accepted_per_depth, tree.offered_per_depth),
                                                              ("rank", tree.accepted_per_rank, tree.offered_per_rank))
                for j, a in enumerate(accepted) if a > (offered[j] if j < len(offered) else 0)]
        if over:
            problems.append(f"request {i}: accepted more than offered at {', '.join(over)}")
        if any(n > size for n, size in zip(lengths, tree.tree_sizes)):
            problems.append(f"request {i}: a round accepted more nodes than its tree has")
    return tuple(problems)


def _trimmed(counts) -> list[int]:
    """Counts without their trailing zeros (a counter sized to k, or grown to the deepest depth reached)."""
    values = list(counts)
    while values and values[-1] == 0:
        values.pop()
    return values
