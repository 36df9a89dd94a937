"""Mamba-2's selective state-space recurrence (SSD), one sequence at a time: the readable torch reference, per token
(decode and verify: the state after every token can be kept) and in chunks (committed tokens: prefill, prompt chunks).

Per head h with input x_t [head_dim], step dt_t > 0, decay rate A_h < 0 and the head's group's B_t, C_t [state_size]
(fp32 throughout; S is the [head_dim, state_size] SSM state):
    S <- exp(dt_t * A_h) * S + dt_t * x_t B_t^T          decay, then write x_t under key B_t
    y_t = S C_t + D_h * x_t                              read under query C_t, plus the skip
dt_t = clamp(softplus(dt_raw_t + dt_bias), time_step_limit) comes in already computed (Mamba2Mixer).

The chunked form is the same state and outputs with a chunk's work as C x C products: with a_t the running sum of
dt_s * A since the chunk start and S the state entering it,
    y_t = exp(a_t) S C_t + sum_{s <= t} exp(a_t - a_s) (C_t . B_s) dt_s x_s + D x_t
    S'  = exp(a_C) S + sum_s exp(a_C - a_s) dt_s x_s B_s^T
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CHUNK_SIZE = 64


@dataclass(frozen=True, slots=True)
class ScanOutput:
    output: torch.Tensor  # [num_tokens, num_heads, head_dim] fp32, the skip D * x included
    final_state: torch.Tensor  # [num_heads, head_dim, state_size] fp32, after the last token
    # [num_points, num_heads, head_dim, state_size] fp32: after each token (per-token form, keep_states) or after
    # each of `state_at` (chunked form); None unless asked
    states: torch.Tensor | None


def _per_head(bc: torch.Tensor, num_heads: int) -> torch.Tensor:  # [T, G, N] -> [T, H, N] fp32
    return bc.float().repeat_interleave(num_heads // bc.shape[1], dim=1)


def ssd_scan(
    x: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    dt: torch.Tensor,  # [num_tokens, num_heads] fp32, softplus'd and clamped
    a: torch.Tensor,  # [num_heads] fp32, -exp(A_log)
    b: torch.Tensor,  # [num_tokens, num_groups, state_size]
    c: torch.Tensor,  # [num_tokens, num_groups, state_size]
    d: torch.Tensor,  # [num_heads]
    initial_state: torch.Tensor,  # [num_heads, head_dim, state_size] fp32
    *,
    keep_states: bool = False,
) -> ScanOutput:
    """Token by token from `initial_state`; `keep_states` also returns the state after every token."""
    num_heads = x.shape[1]
    xf, bf, cf = x.float(), _per_head(b, num_heads), _per_head(c, num_heads)
    decay = torch.exp(dt * a)  # [T, H]
    state = initial_state.float()
    out = torch.empty_like(xf)
    kept = []
    for t in range(x.shape[0]):
        write = (dt[t, :, None] * xf[t])[:, :, None] * bf[t, :, None, :]  # [H, P, N]
        state = decay[t, :, None, None] * state + write
        out[t] = (state @ cf[t, :, :, None])[..., 0] + d.float()[:, None] * xf[t]
        if keep_states:
            kept.append(state)
    return ScanOutput(out, state, torch.stack(kept) if keep_states and kept else None)


def ssd_scan_chunked(
    x: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    dt: torch.Tensor,  # [num_tokens, num_heads] fp32
    a: torch.Tensor,  # [num_heads] fp32
    b: torch.Tensor,  # [num_tokens, num_groups, state_size]
    c: torch.Tensor,  # [num_tokens, num_groups, state_size]
    d: torch.Tensor,  # [num_heads]
    initial_state: torch.Tensor,  # [num_heads, head_dim, state_size] fp32
    chunk_size: int = CHUNK_SIZE,
    state_at: tuple[int, ...] = (),  # token counts (ascending, 1 .. num_tokens) after which the state is kept too
) -> ScanOutput:
    """The scan over the tokens in chunks of `chunk_size` (chunks also end at `state_at`): outputs, final state and,
    with `state_at`, the states there."""
    num_tokens, num_heads, _ = x.shape
    # heads first: [H, T, ...]
    xs = x.float().transpose(0, 1)
    bs, cs = _per_head(b, num_heads).transpose(0, 1), _per_head(c, num_heads).transpose(0, 1)
    log_decay = (dt * a).t()  # [H, T] dt_t * A_h
    dts = dt.t()  # [H, T]
    state = initial_state.float().clone()
    out = torch.empty_like(xs)
    kept = []
    cuts = list(state_at)
    start = 0
    while start < num_tokens:
        end = min(start + chunk_size, num_tokens, cuts[0] if cuts else num_tokens)
        n = end - start
        cum = log_decay[:, start:end].cumsum(dim=1)  # [H, C] a_t
        xc, bc, cc = xs[:, start:end], bs[:, start:end], cs[:, start:end]
        weighted = dts[:, start:end, None] * xc  # [H, C, P] dt_s x_s
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        decay = torch.where(causal, cum[:, :, None] - cum[:, None, :], torch.full((), float("-inf"),
                                                                                  device=x.device)).exp()
        scores = decay * (cc @ bc.transpose(1, 2))  # [H, C, C] exp(a_t - a_s) (C_t . B_s), s <= t
        out[:, start:end] = cum.exp()[:, :, None] * (cc @ state.transpose(1, 2)) + scores @ weighted
        tail = (cum[:, -1:] - cum).exp()  # [H, C] exp(a_C - a_s)
        state = cum[:, -1].exp()[:, None, None] * state + (weighted * tail[:, :, None]).transpose(1, 2) @ bc
        if cuts and cuts[0] == end:
            kept.append(state)
            cuts.pop(0)
        start = end
    out = out + d.float()[:, None, None] * xs
    return ScanOutput(out.transpose(0, 1), state, torch.stack(kept) if kept else None)
