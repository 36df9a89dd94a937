"""The short causal depthwise convolution in front of a Gated DeltaNet's q/k/v (or a Mamba-2 mixer's x/B/C), with
its carried state.

The conv state of a request is the last kernel_size - 1 inputs it saw ([channels, kernel_size - 1], zeros before its
first token): one token's output is silu(sum_j weight[:, j] * window[:, j] + bias) over that state plus the token
(Mamba-2 has the bias, Gated DeltaNet none).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def causal_conv(
    x: torch.Tensor,  # [num_tokens, channels] one request's tokens
    state: torch.Tensor,  # [channels, kernel_size - 1] the inputs before them
    weight: torch.Tensor,  # [channels, kernel_size]
    *,
    keep_states: bool = False,
    bias: torch.Tensor | None = None,  # [channels]
    windowed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(silu'd output [num_tokens, channels], state after the last token [channels, kernel_size - 1],
    the state after each token [num_tokens, channels, kernel_size - 1] when kept, else None).

    `windowed`: each output as an explicit weighted sum over its window instead of F.conv1d (the same values to
    rounding): CPU conv1d takes ~20 ms for one output position at some channel counts (a one-token decode row of the
    Mamba-2 mixer's 192 channels), the window sum microseconds."""
    num_tokens = x.shape[0]
    width = weight.shape[1] - 1
    full = torch.cat([state.to(x.dtype), x.t()], dim=1)  # [C, width + T]
    if windowed:
        windows = full.to(weight.dtype).unfold(1, width + 1, 1)  # [C, T, kernel]
        out = (windows * weight[:, None, :]).sum(-1) + (0 if bias is None else bias[:, None])  # [C, T]
    else:
        out = F.conv1d(full[None].to(weight.dtype), weight[:, None, :], bias, groups=weight.shape[0])[0]  # [C, T]
    states = None
    if keep_states:
        # after token t the state is inputs (t + 1 .. t + width] of `full`
        states = full.unfold(1, width, 1)[:, 1:].permute(1, 0, 2).contiguous()  # [T, C, width]
    return F.silu(out).t().to(x.dtype), full[:, num_tokens:].clone(), states


def conv_states_at(
    x: torch.Tensor,  # [num_tokens, channels] one request's tokens
    state: torch.Tensor,  # [channels, kernel_size - 1] the inputs before them
    num_tokens_at: list[int],  # [num_points] each in 1 .. num_tokens
) -> torch.Tensor:  # [num_points, channels, kernel_size - 1]
    """The conv state after the first num_tokens_at[i] tokens: the last kernel_size - 1 inputs up to there."""
    width = state.shape[1]
    full = torch.cat([state.to(x.dtype), x.t()], dim=1)  # [C, width + T]
    return torch.stack([full[:, n : n + width] for n in num_tokens_at]).to(state.dtype)
