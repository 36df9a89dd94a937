"""The gated delta rule, one sequence at a time: the readable torch reference every other form is tested against.

Per value head h and token t (fp32 throughout; S is the [key_dim, value_dim] recurrent state):
    S <- exp(g_t) * S                                   decay
    S <- S + k_t (beta_t * (v_t - S^T k_t))^T            delta-rule write of v_t under key k_t
    o_t = S^T (q_t / sqrt(key_dim))                      read
with q and k L2-normalised per head (Qwen3-Next, as transformers' `torch_recurrent_gated_delta_rule`).
`keep_states` also returns the state after every token: a verify keeps them so the engine can commit the state
after the last accepted token without a replay (recurrent/state_cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class DeltaRuleOutput:
    output: torch.Tensor  # [num_tokens, num_v_heads, v_dim] fp32
    final_state: torch.Tensor  # [num_v_heads, k_dim, v_dim] fp32, after the last token
    states: torch.Tensor | None  # [num_tokens, num_v_heads, k_dim, v_dim] fp32 after each token; None unless kept


def l2_normalized(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:  # [..., dim] -> same, fp32
    # rsqrt(sum + eps), as transformers and fla normalise (not x / max(norm, eps)): bit-level agreement matters
    # for greedy identity.
    x = x.float()
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def gated_delta_rule(
    query: torch.Tensor,  # [num_tokens, num_k_heads, k_dim]
    key: torch.Tensor,  # [num_tokens, num_k_heads, k_dim]
    value: torch.Tensor,  # [num_tokens, num_v_heads, v_dim]
    log_decay: torch.Tensor,  # [num_tokens, num_v_heads] g_t <= 0
    beta: torch.Tensor,  # [num_tokens, num_v_heads] write strength in (0, 1)
    initial_state: torch.Tensor,  # [num_v_heads, k_dim, v_dim] fp32
    *,
    keep_states: bool = False,
) -> DeltaRuleOutput:
    num_tokens, num_k_heads, k_dim = key.shape
    num_v_heads = value.shape[1]
    group = num_v_heads // num_k_heads  # each q/k head serves `group` consecutive value heads
    q = l2_normalized(query).repeat_interleave(group, dim=1) * k_dim ** -0.5  # [T, Hv, Dk]
    k = l2_normalized(key).repeat_interleave(group, dim=1)  # [T, Hv, Dk]
    v, g, b = value.float(), log_decay.float(), beta.float()
    state = initial_state.float().clone()
    out = torch.empty(num_tokens, num_v_heads, value.shape[2], dtype=torch.float32, device=value.device)
    states = (torch.empty(num_tokens, *state.shape, dtype=torch.float32, device=value.device)
              if keep_states else None)
    for t in range(num_tokens):
        state, out[t] = delta_rule_step(state, q[t], k[t], v[t], g[t], b[t])
        if states is not None:
            states[t] = state
    return DeltaRuleOutput(out, state, states)


def delta_rule_step(
    state: torch.Tensor,  # [..., num_v_heads, k_dim, v_dim] fp32 the state before the token
    query: torch.Tensor,  # [..., num_v_heads, k_dim] fp32, normalised, scaled and repeated to the value heads
    key: torch.Tensor,  # [..., num_v_heads, k_dim] fp32, normalised and repeated
    value: torch.Tensor,  # [..., num_v_heads, v_dim] fp32
    log_decay: torch.Tensor,  # [..., num_v_heads] fp32
    beta: torch.Tensor,  # [..., num_v_heads] fp32
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of the rule over any leading dims: (state after it, its output [..., num_v_heads, v_dim]). The
    chain above and the tree verify (recurrent/tree_verify.py) run this same arithmetic, so a tree node's state
    equals the chain's bit for bit along its path."""
    state = state * log_decay.exp()[..., None, None]
    remembered = (state * key[..., None]).sum(dim=-2)  # [..., Hv, Dv] what the state recalls under the key
    delta = (value - remembered) * beta[..., None]
    state = state + key[..., None] * delta[..., None, :]
    return state, (state * query[..., None]).sum(dim=-2)
