"""Tree verification batched over requests on the device: the rules of verify/tree.py without a host walk.

Same rules, tested against the walk (tests/speculation/test_tree_verify_batched.py):
- greedy: node i is accepted when it and every ancestor match the target argmax at their parent's row
  (`all_along_path`); the path is the deepest accepted node (first in node order on a tie) and its ancestors; the
  bonus is the argmax at its row. Identical to `verify_tree` on every input.
- sampled, deterministic children (draft_probs None, what every drafter here proposes): at a node with target
  distribution p and children c_1..c_m, the walk accepts c_j with probability r_j(c_j), r_j = p without
  c_1..c_{j-1}, renormalized: p(c_j) / (1 - sum_{l<j} p(c_l)) in closed form (a child repeating an earlier
  sibling's token has r_j(c_j) = 0; a sibling after the mass ran out is never reached: 0). Every node draws its
  acceptance uniform up front; a node is tried only when its parent is accepted and its earlier siblings are
  not, so the first hit among a node's children is the one the walk takes, and the accepted path is the set of
  first hits all of whose ancestors are first hits. The token after the path is drawn from p at its last node
  without that node's children (all of them tried and rejected), renormalized; p itself when nothing is left
  (the walk's fallback). Same law as the walk; not the same draws (the walk draws one uniform per tried child,
  request by request): a seeded request draws exactly its num_nodes uniforms, then its V exponentials
  (sampling.sample_from_probs), as the chain verifier's seeded requests do, so its tokens do not depend on the
  rest of the batch.
- i.i.d. children (draft_probs given): the residual depends on the order of rejections in a way that has no
  closed form per node; `verify_tree` (the walk) handles it. No drafter proposes such trees today.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specbench.device_copy import to_device
from specbench.speculation.sampling import SamplingTensors, logits_to_probs, sample_from_probs
from specbench.speculation.tree.draft_tree import DraftTree
from specbench.speculation.tree.padded import PaddedTree, all_along_path, output_tokens, pad_tree, path_of
from specbench.speculation.verify.tree import TreeVerifyResult


def verify_tree_batched(
    target_logits: torch.Tensor,  # [total_rows, V], rows laid out as tree.cu_num_rows
    tree: DraftTree,
    st: SamplingTensors,
    num_nodes: Sequence[int] | None = None,  # [num_reqs] host copy of tree.num_nodes; None: read it (a sync)
    padded: PaddedTree | None = None,  # pad_tree(tree, max(num_nodes)) when the caller has it already
) -> TreeVerifyResult:
    """verify_tree's rules (module docstring) for deterministic children, with no host read when `num_nodes` is
    given: accepted_nodes is then [num_reqs, max(num_nodes)] wide (-1 past each path), output_token_ids one wider."""
    total_rows = target_logits.shape[0]
    if target_logits.dim() != 2:
        raise ValueError(f"target_logits must be [total_rows, V], got {tuple(target_logits.shape)}")
    if st.num_reqs != tree.num_reqs:
        raise ValueError(f"{tree.num_reqs} requests in the tree, {st.num_reqs} in the sampling tensors")
    if num_nodes is None:
        num_nodes = tree.num_nodes.tolist()
        if total_rows != sum(num_nodes) + tree.num_reqs:
            raise ValueError(f"target_logits must be [{sum(num_nodes) + tree.num_reqs}, V], got {total_rows} rows")
    width = max(num_nodes, default=0)
    padded = pad_tree(tree, width) if padded is None else padded
    parent_row = padded.parent_row()
    if not st.all_greedy:
        sampled = _sampled(target_logits, padded, st, num_nodes, parent_row, width)
        if st.is_greedy_cpu is not None and not any(st.is_greedy_cpu):
            return sampled
    target_argmax = target_logits.argmax(dim=-1)  # [total_rows]
    is_match = padded.token_ids == target_argmax[parent_row]
    greedy = _greedy(padded, target_argmax, all_along_path(padded, is_match), width)
    if st.all_greedy:
        return greedy
    is_greedy = st.is_greedy.to(target_logits.device)
    return TreeVerifyResult(
        accepted_nodes=torch.where(is_greedy[:, None], greedy.accepted_nodes, sampled.accepted_nodes),
        num_accepted=torch.where(is_greedy, greedy.num_accepted, sampled.num_accepted),
        output_token_ids=torch.where(is_greedy[:, None], greedy.output_token_ids, sampled.output_token_ids),
    )


def _greedy(tree: PaddedTree, target_argmax: torch.Tensor, is_accepted: torch.Tensor, width: int) -> TreeVerifyResult:
    # the deepest accepted node, the first in node order among the deepest: score depth, then -index
    slot = torch.arange(width, device=is_accepted.device)
    score = torch.where(is_accepted, tree.depth * (width + 1) + (width - slot), -1)
    if width:
        deepest = torch.where(is_accepted.any(dim=1), score.argmax(dim=1), -1)  # [num_reqs]
        is_on_path = tree.is_ancestor.gather(1, deepest.clamp_min(0)[:, None, None].expand(-1, 1, width))[:, 0]
        is_on_path &= (deepest >= 0)[:, None]
    else:
        is_on_path = is_accepted
    path = path_of(tree, is_on_path, width)
    final = target_argmax[tree.first_row + 1 + path.last_node]
    return TreeVerifyResult(accepted_nodes=path.accepted_nodes, num_accepted=path.num_accepted,
                            output_token_ids=output_tokens(tree, path, final))


def sibling_accept_probs(
    child_probs: torch.Tensor,  # [num_reqs, width] p(c_i) at the parent's row, 0 for a repeated token or padding
    tree: PaddedTree,
) -> torch.Tensor:  # [num_reqs, width] P(accept node i | its parent accepted, its earlier siblings rejected)
    """The deterministic-children rule (verify.tree.sibling_step) for every node at once, in closed form."""
    earlier = (tree.is_earlier_sibling.to(child_probs.dtype) * child_probs[:, None, :]).sum(dim=2)  # mass tried
    left = 1.0 - earlier
    return torch.where(left > 0, (child_probs / left.clamp_min(torch.finfo(child_probs.dtype).tiny)).clamp(0.0, 1.0),
                       0.0)


def _sampled(target_logits: torch.Tensor, tree: PaddedTree, st: SamplingTensors, num_nodes: Sequence[int],
             parent_row: torch.Tensor, width: int) -> TreeVerifyResult:
    device = target_logits.device
    req_of_row = to_device([r for r, n in enumerate(num_nodes) for _ in range(n + 1)], torch.int64, device)
    target_probs = logits_to_probs(  # [total_rows, V] warped (greedy rows: one-hot, unused)
        target_logits, st.temperature[req_of_row], st.top_k[req_of_row], st.top_p[req_of_row])
    tokens = tree.token_ids.clamp_min(0)
    child_probs = target_probs[parent_row, tokens]  # [num_reqs, width]
    is_repeat = (tree.is_earlier_sibling & (tree.token_ids[:, :, None] == tree.token_ids[:, None, :])).any(dim=2)
    child_probs = torch.where(tree.is_node & ~is_repeat, child_probs, 0.0)
    accept = sibling_accept_probs(child_probs, tree)
    is_hit = _acceptance_uniforms(st, num_nodes, width, device) <= accept
    is_first_hit = is_hit & ~(tree.is_earlier_sibling & is_hit[:, None, :]).any(dim=2)
    path = path_of(tree, all_along_path(tree, is_first_hit), width)
    # the token after the path: p at its last node without that node's (all rejected) children
    last_row = tree.first_row + 1 + path.last_node
    last_probs = target_probs[last_row]  # [num_reqs, V]
    is_tried = tree.is_node & (tree.parent == path.last_node[:, None])
    tried_mass = torch.zeros_like(last_probs).scatter_add_(1, tokens, is_tried.to(last_probs.dtype))
    residual = torch.where(tried_mass > 0, 0.0, last_probs)
    residual = torch.where((residual.sum(dim=1) > 0)[:, None], residual, last_probs)
    final = sample_from_probs(residual, st.sampled_generators())
    return TreeVerifyResult(accepted_nodes=path.accepted_nodes, num_accepted=path.num_accepted,
                            output_token_ids=output_tokens(tree, path, final))


def _acceptance_uniforms(st: SamplingTensors, num_nodes: Sequence[int], width: int,
                         device: torch.device) -> torch.Tensor:  # [num_reqs, width] in (0, 1]
    """One uniform per node; a seeded sampled request draws exactly its own num_nodes from its generator, before
    its final token's exponentials (verifier.draw_uniforms' convention)."""
    uniforms = torch.rand(st.num_reqs, width, device=device)
    for r, generator in enumerate(st.sampled_generators()):
        if generator is not None and num_nodes[r]:
            uniforms[r, : num_nodes[r]] = torch.rand(num_nodes[r], generator=generator, device=device)
    return 1.0 - uniforms  # rand is in [0, 1): a zero acceptance probability never accepts
