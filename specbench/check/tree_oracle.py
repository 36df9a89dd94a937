"""Check 3 on tree rounds: every recorded tree round (speculation/tree/records.py) against the drafter recomputed
cache-free along each node's branch (check/tree_laws.py), in three parts:
- law: the log-probs the drafter recorded at the root and at each fed node equal the recomputed law (compared up to
  a constant, i.e. as logits; tolerance rtol x max(1, max |logit|), the chain oracle's, and for a head chaining its
  own hidden x (1 + step)^2, step = the node's depth + 1 as in a chain: the tree step sums its attention over other
  keys than the chain recompute (masked tree rows), and the sharp tiny heads amplify that rounding along the chain:
  up to 6x per step measured, 3.8 x rtol x max |logit| at step 2 on EAGLE-1 seed 16, where (1 + step) alone gave
  the one false alarm in 120 clean tree rows; the mutants' diffs are 3.8 to 21, far above);
- shape: parents precede children, the parent row each draft step was handed and the rows its mask let it see are
  the node's branch (check/tree_choice.py);
- choice: the fed frontiers and the kept tree are the top-k choice the recomputed laws define, up to what the
  recorded and recomputed laws disagree by.
A bug that moves only the drafts (a draft step seeing a sibling, a frontier or budget cut wrong) keeps greedy output
exact and only lowers acceptance; here it is a mismatch at a named node.
"""

from __future__ import annotations

from specbench.check.target_features import TargetFeatureCache
from specbench.check.tree_choice import choice_errors, shape_errors
from specbench.check.tree_laws import draft_lm_laws, eagle_laws
from specbench.speculation.capabilities import ConsumesTargetFeatures
from specbench.speculation.draft_records import TreeRoundRecord

TREE_ROUND = " tree round at position "  # every mismatch line names its round so (check/oracle.py tallies kinds)


def mismatch_kind(line: str) -> str:
    """'law at depth 1', 'law at the root', 'shape' or 'choice' of a compare_tree_records line."""
    return line.split(": ")[1]


def compare_tree_records(proposer, target_model, records: list[TreeRoundRecord],
                         rtol: float) -> tuple[int, list[str]]:
    """(laws compared: the root and the fed nodes of every round, mismatch descriptions); `proposer` and
    `target_model` the reference engine's (check/reference.py)."""
    features = _feature_cache(proposer, target_model, records)
    is_chained = features is not None
    num, bad = 0, []
    for record in records:
        where = f"{record.request_id}{TREE_ROUND}{len(record.token_ids) - 1}"
        num += 1 + len(record.fed_branches)
        shape = shape_errors(record)
        if shape:
            bad += [f"{where}: shape: {e}" for e in shape]
            continue
        if is_chained:
            newest = len(record.token_ids) - 1
            laws = eagle_laws(proposer, record, features.features(record.request_id, record.token_ids[:newest]))
        else:
            laws = draft_lm_laws(proposer, record)
        recorded = {(): record.root_log_probs, **{b: record.fed_log_probs[i]
                                                   for i, b in enumerate(record.fed_branches)}}
        max_err = 0.0
        for branch, got in recorded.items():
            ref = laws[branch]
            err = ((got - got.mean()) - (ref - ref.mean())).abs().max().item()
            growth = (1 + len(branch)) ** 2 if is_chained else 1  # len(branch) = the chained step (module doc)
            if err > rtol * growth * max(1.0, (ref - ref.mean()).abs().max().item()):
                node = f"depth {len(branch) - 1}" if branch else "the root"
                bad.append(f"{where}: law at {node}: node {branch}: max |diff| {err:.3g}")
            max_err = max(max_err, (got - ref).abs().max().item())
        # the builder ranked the recorded laws: its choice may differ from the recomputed laws' only where scores
        # (sums of up to `depth` log-probs) are within twice their disagreement
        slack = 2 * record.depth * max_err + 1e-6
        bad += [f"{where}: choice: {e}" for e in choice_errors(record, laws, slack)]
    return num, bad


def _feature_cache(proposer, target_model, records: list[TreeRoundRecord]) -> TargetFeatureCache | None:
    """For a head fed target features: the features of each request's longest committed prefix, one cache-free
    target forward per request; None for a draft LM."""
    if not isinstance(proposer, ConsumesTargetFeatures):
        return None
    cache = TargetFeatureCache(target_model, proposer.target_feature_layers, proposer.block_size, proposer.device)
    needed: dict[str, tuple[int, ...]] = {}
    for record in records:
        tokens = record.token_ids[:-1]  # a round needs the features of positions 0 .. newest - 1
        if len(tokens) > len(needed.get(record.request_id, ())):
            needed[record.request_id] = tokens
    for request_id, tokens in needed.items():
        cache.prime(request_id, tokens)
    return cache

