"""Verification of tree drafts: greedy longest matching path, or lossless recursive rejection over siblings.

The torch reference the batched verifier (verify/tree_batched.py, what the engine runs) is tested against: a walk
from the root, one request at a time.

Target rows follow `tree.py`: request r owns rows cu_num_rows[r] .. cu_num_rows[r + 1] - 1; row 0 is the target
distribution after the root (the last committed token), row 1 + i the distribution after node i.

Sampled rule (one step, at an accepted node whose target distribution is p and whose children, in node order,
carry tokens c_1..c_m). Keep a residual r, starting at p:
- deterministic children (draft_probs=None; what TopKTreeBuilder drafts: the top-k of the draft distribution,
  a fixed function of the context): accept c_j with probability r(c_j); on rejection zero r at c_j and
  renormalize. If every child is rejected, emit a token drawn from the final r (p without the children).
  Lossless: this is sampling from p by first asking "is it c_1?", then "is it c_2, given it is not c_1?", ...:
  P(emit c_j) = prod_{i<j} (1 - p(c_i) / (1 - sum_{l<i} p(c_l))) * p(c_j) / (1 - sum_{l<j} p(c_l)) = p(c_j),
  and P(emit x), x no child, = (1 - sum_j p(c_j)) * p(x) / (1 - sum_j p(c_j)) = p(x).
- i.i.d. sampled children (draft_probs given: row q is the draft distribution each child of that row was
  independently drawn from; SpecInfer's multi-draft rule): accept c_j with probability min(1, r(c_j) / q(c_j));
  on rejection r <- norm(max(r - q, 0)). If every child is rejected, emit a token drawn from the final r.
  Lossless by backward induction: stage j is single-draft speculative sampling of target r_j with a fresh,
  independent draw c_j ~ q, whose rejection branch samples r_{j+1} = norm(max(r_j - q, 0)); stage j + 1 outputs
  r_{j+1}-distributed tokens, so stage j outputs r_j and stage 1 outputs p. The independence is essential:
  applied to top-k children (which are distinct, not independent draws) this rule is NOT lossless.
An accepted child becomes the current node and the step repeats with its own target row and children; a leaf
has no children, so its step emits the bonus token drawn from p. By induction over the path, the emitted tokens
are distributed as the target samples them one at a time.

Greedy rule: node i is accepted when its parent is (the root always is) and its token equals the target argmax at
its parent's row; the path ends at the deepest accepted node (the first in node order on a tie), and the bonus
token is the target argmax at that node's row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.speculation.sampling import SamplingTensors, logits_to_probs
from specbench.speculation.tree.draft_tree import ROOT_PARENT, DraftTree, children_of

PLACEHOLDER_TOKEN_ID = -1


@dataclass(frozen=True, slots=True)
class TreeVerifyResult:
    # [num_reqs, path_width] int64, request-local node index of each accepted node, root to leaf, padded with -1;
    # path_width >= the deepest path: the tree's depth here, the widest request's node count from the sync-free
    # batched verifiers (verify/tree_batched.py, synthetic/tree.py), which cannot read the depth without a sync
    accepted_nodes: torch.Tensor
    num_accepted: torch.Tensor  # [num_reqs] int64, accepted draft nodes (excludes the recovered/bonus token)
    # [num_reqs, path_width + 1] int64: the accepted path's tokens, then the recovered/bonus token, padded with -1
    output_token_ids: torch.Tensor


@dataclass(frozen=True, slots=True)
class SiblingStep:
    accept_probs: torch.Tensor  # [num_children], P(accept child j | children before j rejected)
    residual: torch.Tensor  # [V], distribution of the emitted token when every child is rejected


def sibling_step(
    target_probs: torch.Tensor,  # [V] at the current node
    child_tokens: list[int],  # [num_children] in node order
    draft_probs: torch.Tensor | None,  # [V] the children were drawn i.i.d. from; None = deterministic children
) -> SiblingStep:
    """One node of recursive rejection sampling (rules in the module docstring); keeps the input dtype."""
    residual = target_probs.clone()
    accept = torch.zeros(len(child_tokens), dtype=target_probs.dtype, device=target_probs.device)
    for j, token in enumerate(child_tokens):
        if draft_probs is None:
            accept[j] = residual[token]
            residual[token] = 0.0
        else:
            q = draft_probs[token]
            accept[j] = torch.clamp(residual[token] / q, max=1.0) if q > 0 else 0.0
            residual = (residual - draft_probs).clamp_min(0.0)
        mass = residual.sum()
        if mass <= 0:  # child j was accepted surely: later children and the residual are never reached
            accept[j + 1:] = 0.0
            return SiblingStep(accept_probs=accept, residual=target_probs.clone())
        residual = residual / mass
    return SiblingStep(accept_probs=accept, residual=residual)


@dataclass(frozen=True, slots=True)
class PathOutcome:
    accepted_nodes: tuple[int, ...]  # request-local nodes, root to leaf
    probability: float  # exact probability that the walk accepts exactly this path
    final_probs: torch.Tensor  # [V], distribution of the recovered/bonus token after it


def path_distribution(
    tree: DraftTree,
    req: int,
    target_probs: torch.Tensor,  # [1 + num_nodes, V] this request's warped target rows
    draft_probs: torch.Tensor | None,  # [1 + num_nodes, V] or None (deterministic children)
) -> list[PathOutcome]:
    """The exact law of one request's sampled walk: every path it can accept, its probability, the final token's law.

    Expected acceptance length under a drafting model is sum(len(path) * probability); the losslessness tests
    enumerate with it.
    """
    children = children_of(tree.parents_of(req))
    tokens = tree.tokens_of(req)
    outcomes: list[PathOutcome] = []

    def walk(node: int, path: tuple[int, ...], reach: float) -> None:
        row = node + 1  # the root (node -1) is row 0
        kids = children[node]
        step = sibling_step(target_probs[row], [tokens[c] for c in kids], None if draft_probs is None else draft_probs[row])
        for child, accept in zip(kids, step.accept_probs.tolist()):
            if accept > 0:
                walk(child, path + (child,), reach * accept)
            reach *= 1.0 - accept
        if reach > 0:
            outcomes.append(PathOutcome(accepted_nodes=path, probability=reach, final_probs=step.residual))

    walk(ROOT_PARENT, (), 1.0)
    return outcomes


def verify_tree(
    target_logits: torch.Tensor,  # [total_rows, V], rows laid out as tree.cu_num_rows
    tree: DraftTree,
    draft_probs: torch.Tensor | None,  # [total_rows, V] i.i.d. children's draft distributions; None = deterministic
    st: SamplingTensors,
) -> TreeVerifyResult:
    """Accept one root-to-node path per request and append one recovered or bonus token."""
    total_rows = int(tree.cu_num_rows[-1])
    if target_logits.dim() != 2 or target_logits.shape[0] != total_rows:
        raise ValueError(f"target_logits must be [{total_rows}, V], got {tuple(target_logits.shape)}")
    if draft_probs is not None and tuple(draft_probs.shape) != tuple(target_logits.shape):
        raise ValueError(f"draft_probs must be {tuple(target_logits.shape)}, got {tuple(draft_probs.shape)}")
    if st.num_reqs != tree.num_reqs:
        raise ValueError(f"{tree.num_reqs} requests in the tree, {st.num_reqs} in the sampling tensors")
    num_rows = tree.num_nodes.to(target_logits.device) + 1
    target_probs = None if st.all_greedy else logits_to_probs(  # [total_rows, V] warped, for sampled requests
        target_logits,
        st.temperature.repeat_interleave(num_rows),
        st.top_k.repeat_interleave(num_rows),
        st.top_p.repeat_interleave(num_rows),
    )
    is_greedy = st.is_greedy.tolist()
    # The walks read the tree and the argmax on the host: one copy each, not one per request (a device sync each)
    tree = DraftTree(*(t.cpu() for t in (tree.token_ids, tree.parent, tree.depth, tree.num_nodes, tree.cu_num_nodes)))
    target_argmax = target_logits.argmax(dim=-1).tolist()
    cu_rows = tree.cu_num_rows.tolist()
    paths, finals = [], []
    for req in range(tree.num_reqs):
        rows = slice(cu_rows[req], cu_rows[req + 1])
        if is_greedy[req]:
            path, final = _greedy_walk(tree, req, target_argmax[rows])
        else:
            path, final = _sampled_walk(
                tree, req, target_probs[rows], None if draft_probs is None else draft_probs[rows], st.generators[req]
            )
        paths.append(path)
        finals.append(final)
    return _assemble(tree, paths, finals, target_logits.device)


def _greedy_walk(tree: DraftTree, req: int, target_argmax: list[int]) -> tuple[list[int], int]:
    parents, tokens = tree.parents_of(req), tree.tokens_of(req)
    depth = tree.depth[tree.request_slice(req)].tolist()
    is_accepted: list[bool] = []
    deepest = ROOT_PARENT
    for i, p in enumerate(parents):  # parents precede children: is_accepted[p] is known
        parent_ok = p == ROOT_PARENT or is_accepted[p]
        is_accepted.append(parent_ok and tokens[i] == target_argmax[p + 1])
        if is_accepted[i] and (deepest == ROOT_PARENT or depth[i] > depth[deepest]):
            deepest = i
    return _path_to(parents, deepest), target_argmax[deepest + 1]


def _sampled_walk(
    tree: DraftTree,
    req: int,
    target_probs: torch.Tensor,  # [1 + num_nodes, V]
    draft_probs: torch.Tensor | None,  # [1 + num_nodes, V]
    generator: torch.Generator | None,
) -> tuple[list[int], int]:
    children = children_of(tree.parents_of(req))
    tokens = tree.tokens_of(req)
    node, path = ROOT_PARENT, []
    while True:
        row = node + 1
        kids = children[node]
        step = sibling_step(target_probs[row], [tokens[c] for c in kids], None if draft_probs is None else draft_probs[row])
        accepted = None
        for child, accept in zip(kids, step.accept_probs):
            # 1 - rand is in (0, 1]: a zero acceptance probability never accepts.
            if 1.0 - torch.rand((), generator=generator, device=target_probs.device) <= accept:
                accepted = child
                break
        if accepted is None:
            final = torch.multinomial(step.residual.float(), 1, generator=generator)
            return path, int(final)
        path.append(accepted)
        node = accepted


def _path_to(parents: list[int], node: int) -> list[int]:
    path = []
    while node != ROOT_PARENT:
        path.append(node)
        node = parents[node]
    return path[::-1]


def _assemble(tree: DraftTree, paths: list[list[int]], finals: list[int], device: torch.device) -> TreeVerifyResult:
    max_depth = int(tree.depth.max()) + 1 if tree.depth.numel() else 0
    accepted = torch.full((tree.num_reqs, max_depth), PLACEHOLDER_TOKEN_ID, dtype=torch.int64)
    output = torch.full((tree.num_reqs, max_depth + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int64)
    for req, (path, final) in enumerate(zip(paths, finals)):
        tokens = tree.tokens_of(req)
        accepted[req, : len(path)] = torch.tensor(path, dtype=torch.int64)
        output[req, : len(path) + 1] = torch.tensor([tokens[n] for n in path] + [final], dtype=torch.int64)
    num_accepted = torch.tensor([len(p) for p in paths], dtype=torch.int64)
    return TreeVerifyResult(
        accepted_nodes=accepted.to(device), num_accepted=num_accepted.to(device), output_token_ids=output.to(device)
    )
