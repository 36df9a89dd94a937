"""What the draft oracle records of a tree round (check/tree_oracle.py): per request, the tree the drafter kept, the
frontier nodes it fed (their branches, as the builder names them; the parent row each draft step was told; the tree
rows the step's mask let each see), and its log-probs at the root and at every fed node.

`TreeRoundTrace` is the observer a proposer hands to `tree_propose.grow_tree` only while a recorder is attached
(attach_recorder): production rounds pass None and pay nothing. It copies to the host what the oracle needs (an
oracle-only sync) and turns the batched round into one `TreeRoundRecord` per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.speculation.draft_records import DraftRecorder

if TYPE_CHECKING:
    from specbench.speculation.proposer import ProposeInput
    from specbench.speculation.tree_propose import TreePlan


@dataclass(frozen=True)
class TreeRoundRecord:
    """One request's tree round as the drafter produced it. Token ids are the drafter's vocabulary (what its
    log-probs index); a branch is the tokens from the root's child down to a node."""

    request_id: str
    token_ids: tuple[int, ...]  # committed tokens; the newest (the tree's root) last
    topk: int  # the round's plan: children per frontier node, frontier size per step
    depth: int  # draft steps (the deepest a path can go)
    num_draft_tokens: int  # node budget
    node_token_ids: tuple[int, ...]  # [num_nodes] the kept tree, node order
    parents: tuple[int, ...]  # [num_nodes] request-local parent node index, -1 = the root
    fed_branches: tuple[tuple[int, ...], ...]  # [num_fed] branch of each fed node, in feed (tree row) order
    fed_parent_rows: tuple[int, ...]  # [num_fed] the tree row of its parent the draft step was handed (-1: root)
    fed_sees: tuple[tuple[int, ...], ...]  # [num_fed] the tree rows the draft step's mask lets each row see
    root_log_probs: torch.Tensor  # [draft_vocab] float32 host: the drafter's log-probs after the committed tokens
    fed_log_probs: torch.Tensor  # [num_fed, draft_vocab] float32 host: its log-probs at each fed node


class TreeRoundTrace:
    """Collects one batched tree round inside grow_tree (every request the same shape) and records it per request."""

    def __init__(self, recorder: DraftRecorder, request_ids: tuple[str, ...],
                 token_ids: tuple[tuple[int, ...], ...], topk: int, depth: int, num_draft_tokens: int) -> None:
        self._recorder = recorder
        self._request_ids, self._token_ids = request_ids, token_ids
        self._plan = (topk, depth, num_draft_tokens)
        num_reqs = len(request_ids)
        self._branch_of_node: list[dict[int, tuple[int, ...]]] = [{-1: ()} for _ in range(num_reqs)]
        self._fed_branches: list[list[tuple[int, ...]]] = [[] for _ in range(num_reqs)]
        self._fed_parent_rows: list[list[int]] = [[] for _ in range(num_reqs)]
        self._fed_log_probs: list[torch.Tensor] = []  # per step [num_reqs, num_frontier, V] host

    def step(self, frontier, parent_rows: list[list[int]], log_probs: torch.Tensor) -> None:
        """A draft step fed `frontier` (tree_builder.Frontier) told `parent_rows` and returned `log_probs`
        [num_reqs, num_frontier, V]."""
        tokens, nodes, parents = (frontier.token_ids.tolist(), frontier.node_index.tolist(),
                                  frontier.parent.tolist())
        for r in range(len(self._request_ids)):
            for token, node, parent in zip(tokens[r], nodes[r], parents[r]):
                # the builder's own parent link (a parent never fed would raise KeyError: the trace refuses it)
                branch = self._branch_of_node[r][parent] + (token,)
                self._branch_of_node[r][node] = branch
                self._fed_branches[r].append(branch)
            self._fed_parent_rows[r] += parent_rows[r]
        self._fed_log_probs.append(log_probs.detach().float().cpu())

    def finish(self, root_log_probs: torch.Tensor, tree, masks: torch.Tensor) -> None:
        """root_log_probs [num_reqs, V]; tree: the kept DraftTree; masks [num_reqs, rows, rows] bool: the draft
        steps' tree-row masks (tree_propose.TreeSteps)."""
        root = root_log_probs.detach().float().cpu()
        width = root.shape[-1]
        masks = masks.cpu()
        for r, request_id in enumerate(self._request_ids):
            num_fed = len(self._fed_branches[r])
            fed = (torch.cat([lp[r] for lp in self._fed_log_probs]) if self._fed_log_probs
                   else root.new_zeros(0, width))
            sees = tuple(tuple(torch.nonzero(masks[r, i, :num_fed]).flatten().tolist()) for i in range(num_fed))
            self._recorder.record_tree(TreeRoundRecord(
                request_id=request_id, token_ids=tuple(self._token_ids[r]), topk=self._plan[0],
                depth=self._plan[1], num_draft_tokens=self._plan[2], node_token_ids=tuple(tree.tokens_of(r)),
                parents=tuple(tree.parents_of(r)), fed_branches=tuple(self._fed_branches[r]),
                fed_parent_rows=tuple(self._fed_parent_rows[r]), fed_sees=sees, root_log_probs=root[r],
                fed_log_probs=fed,
            ))


def tree_trace(recorder: DraftRecorder | None, inp: ProposeInput, plan: TreePlan) -> TreeRoundTrace | None:
    """The trace a proposer hands grow_tree: None (record nothing) unless the oracle attached a recorder."""
    if recorder is None:
        return None
    return TreeRoundTrace(recorder, inp.request_ids, inp.token_ids, plan.topk, plan.depth, plan.num_draft_tokens)
