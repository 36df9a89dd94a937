"""The tree verify of a Gated DeltaNet layer (recurrent/tree_verify.py) against the chain reference: every row's
output, conv state and recurrent state equal those of causal_conv + gated_delta_rule run over the row's own path from
its request's slot (root, ancestors, itself), for two requests with different trees in one batch, and a node never
sees its previous row's or a sibling's tokens."""

from __future__ import annotations

import torch

from specbench.recurrent.causal_conv import causal_conv
from specbench.recurrent.gated_delta_rule import gated_delta_rule
from specbench.recurrent.tree_verify import TreeStateRows, tree_verify

NUM_K_HEADS, K_DIM, NUM_V_HEADS, V_DIM, KERNEL = 2, 4, 4, 4, 4
KEY_SIZE, VALUE_SIZE = NUM_K_HEADS * K_DIM, NUM_V_HEADS * V_DIM
CHANNELS = 2 * KEY_SIZE + VALUE_SIZE
# request-local parents of each request's nodes (-1: a child of the root), parents before children
TREES = ([-1, -1, 0, 0, 1, 2], [-1, 0, 1, -1, 3, 0])


def _rows(trees) -> tuple[TreeStateRows, list[list[int]]]:
    """The kept rows' tree (as engine/state_attach.py lays it: each request's root, then its nodes) and each row's
    path of rows from its root."""
    parent_rows, request, depth, paths = [], [], [], []
    for r, parents in enumerate(trees):
        root = len(parent_rows)
        parent_rows += [-1]
        depth += [0]
        paths += [[root]]
        for i, p in enumerate(parents):
            row_of_parent = root if p < 0 else root + 1 + p
            parent_rows += [row_of_parent]
            depth += [depth[row_of_parent] + 1]
            paths += [[*paths[row_of_parent], root + 1 + i]]
        request += [r] * (1 + len(parents))
    return TreeStateRows(*(torch.tensor(x, dtype=torch.int64) for x in (parent_rows, request, depth)),
                         max(depth) + 1), paths


def test_each_row_continues_its_own_path_from_its_slot():
    gen = torch.Generator().manual_seed(0)
    tree, paths = _rows(TREES)
    num_rows, num_reqs = len(paths), len(TREES)
    mixed = torch.randn(num_rows, CHANNELS, generator=gen)
    log_decay = -torch.rand(num_rows, NUM_V_HEADS, generator=gen)
    beta = torch.rand(num_rows, NUM_V_HEADS, generator=gen)
    weight = torch.randn(CHANNELS, KERNEL, generator=gen)
    slot_conv = torch.randn(num_reqs, CHANNELS, KERNEL - 1, generator=gen)
    slot_rec = torch.randn(num_reqs, NUM_V_HEADS, K_DIM, V_DIM, generator=gen)
    got = tree_verify(mixed, log_decay, beta, weight, slot_conv, slot_rec, tree, (KEY_SIZE, KEY_SIZE, VALUE_SIZE),
                      (NUM_K_HEADS, K_DIM, NUM_V_HEADS, V_DIM))
    for row, path in enumerate(paths):
        r = int(tree.request[row])
        conv_out, conv_state, _ = causal_conv(mixed[path], slot_conv[r], weight)
        q, k, v = conv_out.split([KEY_SIZE, KEY_SIZE, VALUE_SIZE], dim=-1)
        n = len(path)
        rule = gated_delta_rule(q.view(n, NUM_K_HEADS, K_DIM), k.view(n, NUM_K_HEADS, K_DIM),
                                v.view(n, NUM_V_HEADS, V_DIM), log_decay[path], beta[path], slot_rec[r])
        torch.testing.assert_close(got.output[row], rule.output[-1], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.conv_states[row], conv_state, rtol=0, atol=0)  # the path's last inputs
        torch.testing.assert_close(got.recurrent_states[row], rule.final_state, rtol=1e-5, atol=1e-6)
    # a node whose previous row is a sibling (request 0's node 1 after node 0) differs from the chain over its rows
    chain = gated_delta_rule(*_chain_args(mixed[[0, 1, 2]], slot_conv[0], weight, log_decay[[0, 1, 2]],
                                          beta[[0, 1, 2]]), slot_rec[0])
    assert not torch.allclose(got.recurrent_states[2], chain.final_state, atol=1e-3)


def _chain_args(mixed, conv_state, weight, log_decay, beta):
    conv_out, _, _ = causal_conv(mixed, conv_state, weight)
    q, k, v = conv_out.split([KEY_SIZE, KEY_SIZE, VALUE_SIZE], dim=-1)
    n = mixed.shape[0]
    return (q.view(n, NUM_K_HEADS, K_DIM), k.view(n, NUM_K_HEADS, K_DIM), v.view(n, NUM_V_HEADS, V_DIM), log_decay,
            beta)
