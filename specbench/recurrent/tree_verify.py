"""A tree verify through a Gated DeltaNet layer: every tree row's conv and recurrent state is its parent's advanced by
the row's own token, so each node sees exactly the chain of tokens on its path from the root (the newest committed
token), never its previous row's or a sibling's.

Rows are processed level by level, batched over every row of the forward: at level d the rows at depth d gather
their parents' states (final since level d - 1; a root's parent is its request's slot), take one step of the
short conv and one step of the rule (recurrent/gated_delta_rule.py delta_rule_step, the chain's own arithmetic), and
keep the state after themselves. Rows at other depths compute too and are masked out: depth + 1 levels of whole-batch
ops, no host loop over nodes and no host read of the tree (its shape stays on the device, engine/tree_inputs.py).
Each row's state is kept (as a chain verify keeps each position's) so the commit can copy the state after the last
accepted node of the accepted path into the slot (engine/state_attach.py commit_tree_states): no replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specbench.recurrent.gated_delta_rule import delta_rule_step, l2_normalized
from specbench.recurrent.state_snapshots import SnapshotPoint

# The fla kernels' refusal (set_draft_shape, the embedded backend, and the layer itself as the last guard)
HYBRID_TREE_FLA_REFUSAL = ("tree drafts on a hybrid target cannot run on --recurrent-kernels fla: fla-core's "
                           "recurrent kernel chains one state per sequence, while a tree verify continues each node "
                           "from its parent's state; use --recurrent-kernels auto, triton or torch, or chains "
                           "(eagle_topk 1)")


@dataclass(frozen=True, slots=True)
class TreeStateRows:
    """The tree of a tree verify, per kept row (the forward's rows: request r's root, then its nodes in node order)."""

    # [num_pending] int64 device: the kept row whose state each row continues; -1 = the request's slot (its root)
    parent_rows: torch.Tensor
    request: torch.Tensor  # [num_pending] int64 device: each row's request (index into StateRows.slots)
    depth: torch.Tensor  # [num_pending] int64 device: 0 for a root, 1 for a child of the root, ...
    num_levels: int  # host bound: every depth is below it (the round's TreePlan depth + 1)
    # the snapshot points the tree's positions cross (row = depth after the root, as a chain's row): taken at the
    # commit from the accepted path's nodes (commit_tree_states), not by the layer, which cannot tell which node of
    # a depth will be accepted
    snapshots: tuple[SnapshotPoint, ...] = ()


@dataclass(frozen=True, slots=True)
class TreeVerifyOutput:
    output: torch.Tensor  # [num_rows, num_v_heads, v_dim] fp32
    conv_states: torch.Tensor  # [num_rows, channels, kernel_size - 1] in the conv slots' dtype, after each row
    recurrent_states: torch.Tensor  # [num_rows, num_v_heads, k_dim, v_dim] fp32, after each row


def tree_verify(
    mixed: torch.Tensor,  # [num_rows, channels] the conv's inputs (q | k | v) of every row
    log_decay: torch.Tensor,  # [num_rows, num_v_heads]
    beta: torch.Tensor,  # [num_rows, num_v_heads]
    weight: torch.Tensor,  # [channels, kernel_size] the depthwise conv's
    slot_conv: torch.Tensor,  # [num_reqs, channels, kernel_size - 1] each request's slot state (its root's parent)
    slot_recurrent: torch.Tensor,  # [num_reqs, num_v_heads, k_dim, v_dim] fp32
    tree: TreeStateRows,
    split: tuple[int, int, int],  # (key_size, key_size, value_size): the conv output's q | k | v channels
    heads: tuple[int, int, int, int],  # (num_k_heads, k_dim, num_v_heads, v_dim)
) -> TreeVerifyOutput:
    num_rows = mixed.shape[0]
    num_k_heads, k_dim, num_v_heads, v_dim = heads
    # a row's parent among [the requests' slot states, then the rows' own]: one gather per level
    parent = torch.where(tree.parent_rows < 0, tree.request, slot_conv.shape[0] + tree.parent_rows)  # [num_rows]

    # the conv: a row's window is its parent's state (the last kernel - 1 inputs on its path) then its own input
    conv_states = slot_conv.new_zeros(num_rows, *slot_conv.shape[1:])  # [num_rows, C, W]
    conv_out = mixed.new_zeros(num_rows, mixed.shape[1])  # [num_rows, C]
    for level in range(tree.num_levels):
        at = tree.depth == level  # [num_rows]
        window = torch.cat([torch.cat([slot_conv, conv_states])[parent].to(mixed.dtype), mixed[:, :, None]], dim=2)
        out = F.conv1d(window.to(weight.dtype), weight[:, None, :], groups=weight.shape[0])[:, :, 0]  # [num_rows, C]
        conv_out = torch.where(at[:, None], F.silu(out).to(mixed.dtype), conv_out)
        conv_states = torch.where(at[:, None, None], window[:, :, 1:].to(conv_states.dtype), conv_states)

    # the rule, in the chain's form (gated_delta_rule): q, k normalised per head and repeated to the value heads
    query, key, value = conv_out.split(list(split), dim=-1)
    group = num_v_heads // num_k_heads
    q = l2_normalized(query.reshape(num_rows, num_k_heads, k_dim)).repeat_interleave(group, dim=1) * k_dim ** -0.5
    k = l2_normalized(key.reshape(num_rows, num_k_heads, k_dim)).repeat_interleave(group, dim=1)
    v, g, b = value.reshape(num_rows, num_v_heads, v_dim).float(), log_decay.float(), beta.float()
    states = slot_recurrent.new_zeros(num_rows, *slot_recurrent.shape[1:])  # [num_rows, Hv, Dk, Dv]
    output = torch.zeros(num_rows, num_v_heads, v_dim, dtype=torch.float32, device=mixed.device)
    for level in range(tree.num_levels):
        at = tree.depth == level
        stepped, out = delta_rule_step(torch.cat([slot_recurrent.float(), states])[parent], q, k, v, g, b)
        states = torch.where(at[:, None, None, None], stepped, states)
        output = torch.where(at[:, None, None], out, output)
    return TreeVerifyOutput(output, conv_states, states)
