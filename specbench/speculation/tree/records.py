"""How a tree round is recorded for the draft oracle (check/tree_oracle.py): per request a `TreeRoundRecord`
(draft_records.py), the tree the drafter kept, the frontier nodes it fed (their branches, as the builder names them; the
parent row each draft step was handed; the tree rows the step's mask let each see), and its log-probs at the root and at
every fed node.

`TreeRoundTrace` is the observer a proposer hands to the tree growth (tree.device.grow_tree_on_device, the device
path production runs; the host reference tree.propose.grow_tree_reference takes it too) only while a recorder is
attached (attach_recorder); production rounds pass None and pay nothing. Each draft step it keeps device copies of
what the step was fed and returned (no host read: the step loop runs as it does unrecorded); `finish` reads them back
once (an oracle-only sync) and turns the batched round into one `TreeRoundRecord` per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.speculation.draft_records import DraftRecorder, TreeRoundRecord

if TYPE_CHECKING:
    from specbench.speculation.proposer import ProposeInput
    from specbench.speculation.tree.plan import TreePlan
    from specbench.speculation.tree.step import GrownTree, TreeStepInput


@dataclass(frozen=True)
class _StepCopy:
    """Device copies of one draft step: what was recorded stays what the step saw, whatever a later step (or a
    buffer the step loop reuses) writes."""

    token_ids: torch.Tensor  # [num_reqs, num_frontier] int64, drafter vocabulary
    node_index: torch.Tensor  # [num_reqs, num_frontier] int64 builder creation index
    parent: torch.Tensor  # [num_reqs, num_frontier] int64 builder creation index of the parent, -1 = root
    parent_row: torch.Tensor  # [num_reqs, num_frontier] int64 the tree row the step was handed, -1 = root
    mask: torch.Tensor  # [num_reqs, num_frontier, num_rows] bool: the tree rows the step's metadata let each see
    log_probs: torch.Tensor  # [num_reqs, num_frontier, V] what the step returned


class TreeRoundTrace:
    """Collects one batched tree round inside the tree growth (every request the same shape) and records it per
    request."""

    def __init__(self, recorder: DraftRecorder, request_ids: tuple[str, ...],
                 token_ids: tuple[tuple[int, ...], ...], topk: int, depth: int, num_draft_tokens: int) -> None:
        self._recorder = recorder
        self._request_ids, self._token_ids = request_ids, token_ids
        self._plan = (topk, depth, num_draft_tokens)
        self._steps: list[_StepCopy] = []

    def step(self, inp: TreeStepInput, log_probs: torch.Tensor) -> None:
        """Draft step `inp.step` was fed `inp` and returned `log_probs` [num_reqs, num_frontier, V] (device)."""
        frontier, num_reqs = inp.frontier, len(self._request_ids)
        num_frontier = frontier.token_ids.shape[1]
        mask = inp.md.tree.mask.reshape(num_reqs, num_frontier, -1)  # every request num_frontier queries (device.py)
        self._steps.append(_StepCopy(frontier.token_ids.clone(), frontier.node_index.clone(), frontier.parent.clone(),
                                     inp.parent_row.clone(), mask.clone(), log_probs.detach().clone()))

    def finish(self, root_log_probs: torch.Tensor, tree: GrownTree) -> None:
        """root_log_probs [num_reqs, V]; tree: the kept trees. Reads the round back (the oracle's one sync)."""
        root = root_log_probs.detach().float().cpu()
        node_tokens, node_parents = tree.token_ids.tolist(), tree.parent.tolist()
        steps = [(s.token_ids.tolist(), s.node_index.tolist(), s.parent.tolist(), s.parent_row.tolist(),
                  s.mask.cpu(), s.log_probs.float().cpu()) for s in self._steps]
        for r, request_id in enumerate(self._request_ids):
            branch_of_node: dict[int, tuple[int, ...]] = {-1: ()}
            fed_branches: list[tuple[int, ...]] = []
            fed_parent_rows: list[int] = []
            fed_sees: list[tuple[int, ...]] = []
            for tokens, nodes, parents, parent_rows, mask, _ in steps:
                for f, (token, node, parent) in enumerate(zip(tokens[r], nodes[r], parents[r])):
                    # the builder's own parent link (a parent never fed raises KeyError: the trace refuses it)
                    branch_of_node[node] = branch_of_node[parent] + (token,)
                    fed_branches.append(branch_of_node[node])
                    fed_sees.append(tuple(torch.nonzero(mask[r, f]).flatten().tolist()))
                fed_parent_rows += parent_rows[r]
            fed = (torch.cat([log_probs[r] for *_, log_probs in steps]) if steps
                   else root.new_zeros(0, root.shape[-1]))
            self._recorder.record_tree(TreeRoundRecord(
                request_id=request_id, token_ids=tuple(self._token_ids[r]), topk=self._plan[0],
                depth=self._plan[1], num_draft_tokens=self._plan[2], node_token_ids=tuple(node_tokens[r]),
                parents=tuple(node_parents[r]), fed_branches=tuple(fed_branches),
                fed_parent_rows=tuple(fed_parent_rows), fed_sees=tuple(fed_sees), root_log_probs=root[r],
                fed_log_probs=fed,
            ))


def tree_trace(recorder: DraftRecorder | None, inp: ProposeInput, plan: TreePlan) -> TreeRoundTrace | None:
    """The trace a proposer hands the tree growth: None (record nothing) unless the oracle attached a recorder."""
    if recorder is None:
        return None
    return TreeRoundTrace(recorder, inp.request_ids, inp.token_ids, plan.topk, plan.depth, plan.num_draft_tokens)
