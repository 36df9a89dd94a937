"""fla-core's gated-delta-rule Triton kernels in our layouts (the "fla" recurrent kernels, recurrent/kernel_choice.py):
the same state and outputs as recurrent/gated_delta_rule.py, to fp32 accumulation noise (H100, one layer at
Qwen3-Next-80B's shape: chunked 1.9e-3 relative, recurrent 3e-7; scripts/bench_fla_gdn.py).

fla takes [B, T, H, D] with as many q/k heads as value heads: q and k are L2-normalised here (our l2_normalized,
rsqrt(sum + eps), as the reference) and repeated to the value heads, the way scripts/bench_fla_gdn.py checked them
against the reference; every input goes in fp32, the state [N, Hv, Dk, Dv] fp32 as our slots hold it. fla is
imported inside the calls only: this module imports on machines without fla (or without a CUDA driver).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.recurrent.gated_delta_rule import l2_normalized


@dataclass(frozen=True, slots=True)
class FlaChunkOutput:
    output: torch.Tensor  # [num_tokens, num_v_heads, v_dim] fp32, the sequences' tokens back to back
    final_states: torch.Tensor  # [num_seqs, num_v_heads, k_dim, v_dim] fp32, each sequence's after its last token


@dataclass(frozen=True, slots=True)
class FlaRecurrentOutput:
    output: torch.Tensor  # [num_seqs, num_tokens, num_v_heads, v_dim] fp32
    states: torch.Tensor  # [num_seqs, num_tokens, num_v_heads, k_dim, v_dim] fp32, the state after each position


def _per_value_head(x: torch.Tensor, num_v_heads: int) -> torch.Tensor:  # [..., Hk, Dk] -> [..., Hv, Dk] fp32
    return l2_normalized(x).repeat_interleave(num_v_heads // x.shape[-2], dim=-2).contiguous()


def fla_chunk(
    query: torch.Tensor,  # [num_tokens, num_k_heads, k_dim] the sequences' tokens back to back
    key: torch.Tensor,  # [num_tokens, num_k_heads, k_dim]
    value: torch.Tensor,  # [num_tokens, num_v_heads, v_dim]
    log_decay: torch.Tensor,  # [num_tokens, num_v_heads]
    beta: torch.Tensor,  # [num_tokens, num_v_heads]
    initial_states: torch.Tensor,  # [num_seqs, num_v_heads, k_dim, v_dim] fp32
    seq_starts: tuple[int, ...],  # [num_seqs + 1] host offsets of each sequence's tokens (each non-empty)
) -> FlaChunkOutput:
    """Committed rows of several sequences in one varlen `chunk_gated_delta_rule` call (fla's B = 1, cu_seqlens)."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    num_v_heads, k_dim = value.shape[1], key.shape[2]
    cu_cpu = torch.tensor(seq_starts, dtype=torch.int64)
    out, final = chunk_gated_delta_rule(
        _per_value_head(query, num_v_heads)[None], _per_value_head(key, num_v_heads)[None],
        value.float().contiguous()[None], log_decay.float().contiguous()[None], beta.float().contiguous()[None],
        scale=k_dim ** -0.5, initial_state=initial_states.float().contiguous(), output_final_state=True,
        cu_seqlens=cu_cpu.to(value.device), cu_seqlens_cpu=cu_cpu)  # the host copy: no device read for chunk indices
    return FlaChunkOutput(out[0].float(), final)


def fla_recurrent(
    query: torch.Tensor,  # [num_seqs, num_tokens, num_k_heads, k_dim]
    key: torch.Tensor,  # [num_seqs, num_tokens, num_k_heads, k_dim]
    value: torch.Tensor,  # [num_seqs, num_tokens, num_v_heads, v_dim]
    log_decay: torch.Tensor,  # [num_seqs, num_tokens, num_v_heads]
    beta: torch.Tensor,  # [num_seqs, num_tokens, num_v_heads]
    initial_states: torch.Tensor,  # [num_seqs, num_v_heads, k_dim, v_dim] fp32
) -> FlaRecurrentOutput:
    """Verify rows of equal length (plain decode: one position) over the batch: `fused_recurrent_gated_delta_rule`
    once per position, chaining the state, so the state after each position is kept for the commit. (One call over
    all positions would keep only the last: H100, 16 requests x 4 positions, 0.20 ms vs 1.57 ms per position, but a
    rollback would then need a replay.)"""
    from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

    num_seqs, num_tokens, num_v_heads, v_dim = value.shape
    k_dim = key.shape[3]
    q, k = _per_value_head(query, num_v_heads), _per_value_head(key, num_v_heads)
    v, g, b = value.float().contiguous(), log_decay.float().contiguous(), beta.float().contiguous()
    out = torch.empty(num_seqs, num_tokens, num_v_heads, v_dim, dtype=torch.float32, device=value.device)
    states = torch.empty(num_seqs, num_tokens, num_v_heads, k_dim, v_dim, dtype=torch.float32, device=value.device)
    state = initial_states.float().contiguous()
    for t in range(num_tokens):
        o, state = fused_recurrent_gated_delta_rule(
            q[:, t : t + 1].contiguous(), k[:, t : t + 1].contiguous(), v[:, t : t + 1].contiguous(),
            g=g[:, t : t + 1].contiguous(), beta=b[:, t : t + 1].contiguous(), scale=k_dim ** -0.5,
            initial_state=state, output_final_state=True)
        out[:, t] = o[:, 0]
        states[:, t] = state
    return FlaRecurrentOutput(out, states)
