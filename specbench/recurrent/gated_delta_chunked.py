"""The gated delta rule in chunks of C tokens: the same state and outputs as the per-token reference
(gated_delta_rule.py), with each chunk's work done as C x C and C x D matrix products (prefill of committed tokens:
no per-position states are kept, only the final one).

Within a chunk, with G_t the running sum of log decays since the chunk start and S the state entering it, the
per-token rule unrolls to a unit lower-triangular system: the chunk's corrections u_t = beta_t (v_t - S_{t-1}^T k_t)
satisfy u = T (beta * v - beta * exp(G) * (K S)) with T = (I + L)^{-1}, L[i, j] = beta_i exp(G_i - G_j) k_i . k_j
(i > j). Then o_t = exp(G_t) q_t S + sum_{j <= t} exp(G_t - G_j) (q_t . k_j) u_j and the state leaving the chunk is
exp(G_C) S + sum_j exp(G_C - G_j) k_j u_j^T.
"""

from __future__ import annotations

import torch

from specbench.recurrent.gated_delta_rule import DeltaRuleOutput, l2_normalized

CHUNK_SIZE = 64


def gated_delta_rule_chunked(
    query: torch.Tensor,  # [num_tokens, num_k_heads, k_dim]
    key: torch.Tensor,  # [num_tokens, num_k_heads, k_dim]
    value: torch.Tensor,  # [num_tokens, num_v_heads, v_dim]
    log_decay: torch.Tensor,  # [num_tokens, num_v_heads]
    beta: torch.Tensor,  # [num_tokens, num_v_heads]
    initial_state: torch.Tensor,  # [num_v_heads, k_dim, v_dim] fp32
    chunk_size: int = CHUNK_SIZE,
    state_at: tuple[int, ...] = (),  # token counts (ascending, 1 .. num_tokens) after which the state is kept too
) -> DeltaRuleOutput:
    """The rule over the tokens from `initial_state`: outputs and the final state; with `state_at`, also the states
    after those tokens (DeltaRuleOutput.states [len(state_at), ...]): chunks end there too."""
    num_tokens, num_k_heads, k_dim = key.shape
    group = value.shape[1] // num_k_heads
    # heads first: [H, T, D]
    q = (l2_normalized(query).repeat_interleave(group, dim=1) * k_dim ** -0.5).transpose(0, 1)
    k = l2_normalized(key).repeat_interleave(group, dim=1).transpose(0, 1)
    v = value.float().transpose(0, 1)
    g, b = log_decay.float().t(), beta.float().t()  # [H, T]
    state = initial_state.float().clone()  # [H, Dk, Dv]
    out = torch.empty_like(v)
    kept = []
    cuts = list(state_at)
    start = 0
    while start < num_tokens:
        end = min(start + chunk_size, num_tokens, cuts[0] if cuts else num_tokens)
        qc, kc, vc, bc = q[:, start:end], k[:, start:end], v[:, start:end], b[:, start:end]
        cum = g[:, start:end].cumsum(dim=1)  # [H, C] G_t
        n = end - start
        decay = (cum[:, :, None] - cum[:, None, :])  # [H, C, C] G_i - G_j
        below = torch.ones(n, n, dtype=torch.bool, device=v.device).tril(-1)
        within = torch.where(below, decay, torch.full_like(decay, float("-inf"))).exp()  # i > j only
        lower = bc[:, :, None] * within * (kc @ kc.transpose(1, 2))  # [H, C, C] L
        eye = torch.eye(n, device=v.device).expand_as(lower)
        rhs = bc[:, :, None] * (vc - cum.exp()[:, :, None] * (kc @ state))  # [H, C, Dv]
        corrections = torch.linalg.solve_triangular(eye + lower, rhs, upper=False, unitriangular=True)
        causal = torch.where(below | torch.eye(n, dtype=torch.bool, device=v.device), decay,
                             torch.full_like(decay, float("-inf"))).exp()  # i >= j
        out[:, start:end] = cum.exp()[:, :, None] * (qc @ state) + (causal * (qc @ kc.transpose(1, 2))) @ corrections
        tail = (cum[:, -1:] - cum).exp()  # [H, C] exp(G_C - G_j)
        state = cum[:, -1].exp()[:, None, None] * state + (kc * tail[:, :, None]).transpose(1, 2) @ corrections
        if cuts and cuts[0] == end:
            kept.append(state)
            cuts.pop(0)
        start = end
    return DeltaRuleOutput(out.transpose(0, 1), state, torch.stack(kept) if kept else None)
