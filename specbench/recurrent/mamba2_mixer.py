"""A Mamba-2 token mixer (Bamba's `mamba`), over a ragged batch, with per-request state slots: the second recurrent
layer kind beside Gated DeltaNet, on the same StateCache, rows, commit and snapshots (recurrent/mixer.py).

in_proj gives the gate z, x|B|C and dt; the short causal conv (with bias) mixes x|B|C and carries the conv state;
the SSD scan (recurrent/ssd_rule.py) carries the SSM state [num_heads, head_dim, state_size]; the output is
RMSNorm'd per group after gating by silu(z) (the gate before the norm, unlike Qwen3-Next's), then out_proj.
Committed rows (prefill, prompt chunks) run the chunked scan, verify rows (plain decode: one position; a verify:
k + 1) the per-token scan keeping each position's state for the commit. Parameter names are the checkpoint's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specbench.recurrent.causal_conv import causal_conv, conv_states_at
from specbench.recurrent.mamba2_config import Mamba2Config
from specbench.recurrent.mixer import RecurrentMixer, is_uniform_verify, keep_verify_states, write_snapshots
from specbench.recurrent.ssd_rule import ssd_scan, ssd_scan_chunked
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_rows import StateRows

VERIFY_PATH = "hybrid.mamba2_verify"  # verify rows (decode, k + 1) through the per-token scan, states kept
CHUNKED_PATH = "hybrid.mamba2_chunked"  # committed rows through the chunked scan, final state into the slot


class GroupedGatedRMSNorm(nn.Module):
    """x * silu(gate), then RMSNorm over each of `num_groups` equal groups of channels, times weight (transformers'
    BambaRMSNormGated: fp32 inside)."""

    def __init__(self, size: int, num_groups: int, eps: float) -> None:
        super().__init__()
        self.num_groups, self.eps = num_groups, eps
        self.weight = nn.Parameter(torch.ones(size))  # [intermediate_size]

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:  # [n, size] each -> [n, size]
        gated = x.float() * F.silu(gate.float())
        groups = gated.view(x.shape[0], self.num_groups, -1)
        normed = groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.view_as(gated).to(x.dtype)


class Mamba2Mixer(RecurrentMixer):
    def __init__(self, config: Mamba2Config, hidden_size: int, eps: float, state_layer: int) -> None:
        super().__init__()
        self.config = config
        self.state_layer = state_layer
        c = config
        # [z (intermediate) | x B C (conv_channels) | dt (num_heads)]
        self.in_proj = nn.Linear(hidden_size, c.intermediate_size + c.conv_channels + c.num_heads,
                                 bias=c.has_proj_bias)
        self.conv1d = nn.Conv1d(c.conv_channels, c.conv_channels, c.conv_kernel_size, groups=c.conv_channels,
                                bias=c.has_conv_bias, padding=c.conv_kernel_size - 1)
        self.dt_bias = nn.Parameter(torch.ones(c.num_heads))  # [num_heads]
        self.A_log = nn.Parameter(torch.zeros(c.num_heads))  # [num_heads] log of the decay rate
        self.D = nn.Parameter(torch.ones(c.num_heads))  # [num_heads] skip
        self.norm = GroupedGatedRMSNorm(c.intermediate_size, c.num_groups, eps)
        self.out_proj = nn.Linear(c.intermediate_size, hidden_size, bias=c.has_proj_bias)

    def forward(
        self,
        x: torch.Tensor,  # [num_tokens, hidden] normed layer input
        query_start_loc_cpu: tuple[int, ...],  # [num_reqs + 1]
        states: StateCache,
        rows: StateRows,
        paths=None,  # execution_paths.PathRecorder, or None
    ) -> torch.Tensor:  # [num_tokens, hidden]
        c = self.config
        gate, xbc, dt_raw = self.in_proj(x).split([c.intermediate_size, c.conv_channels, c.num_heads], dim=-1)
        low, high = c.time_step_limit
        dt = F.softplus(dt_raw.float() + self.dt_bias.float()).clamp(low, high)  # [n, H]
        a = -self.A_log.float().exp()  # [H]
        weight, bias = self.conv1d.weight[:, 0, :], self.conv1d.bias  # [C, kernel], [C] or None
        out = torch.empty(x.shape[0], c.num_heads, c.head_dim, dtype=x.dtype, device=x.device)
        conv_slots, ssm_slots = states.conv[self.state_layer], states.recurrent[self.state_layer]
        kept_conv = kept_ssm = None
        if rows.num_pending:  # [num_pending, C, W], [num_pending, H, P, N] fp32
            kept_conv, kept_ssm = states.kept_rows(self.state_layer, rows.num_pending)
        has_committed = False
        is_batched = is_uniform_verify(rows, query_start_loc_cpu)
        if is_batched:
            self._verify_batched(xbc, dt, a, out, kept_conv, kept_ssm, conv_slots, ssm_slots, rows)
        for r, slot in enumerate(() if is_batched else rows.slots):
            start, end = query_start_loc_cpu[r], query_start_loc_cpu[r + 1]
            if start == end:
                continue
            n = end - start
            is_fresh = rows.starts_fresh[r]  # a (re)prefill from the first token: nothing carried over
            conv_state = torch.zeros_like(conv_slots[slot]) if is_fresh else conv_slots[slot]
            ssm_state = torch.zeros_like(ssm_slots[slot]) if is_fresh else ssm_slots[slot]
            keep = rows.keeps_positions[r]
            conv_out, conv_final, conv_kept = causal_conv(xbc[start:end], conv_state, weight, keep_states=keep,
                                                          bias=bias, windowed=True)
            xs, b, cc = conv_out.split([c.intermediate_size, c.num_groups * c.state_size,
                                        c.num_groups * c.state_size], dim=-1)
            args = (xs.reshape(n, c.num_heads, c.head_dim), dt[start:end], a,
                    b.reshape(n, c.num_groups, c.state_size), cc.reshape(n, c.num_groups, c.state_size), self.D,
                    ssm_state)
            if keep:  # every position's state kept: the commit picks the last accepted one
                scan = ssd_scan(*args, keep_states=True)
                p = rows.pending_starts[r]
                kept_conv[p : p + n] = conv_kept
                kept_ssm[p : p + n] = scan.states
            else:  # committed tokens: the slot moves on now; block boundaries crossed go to the snapshot store
                has_committed = True
                points = [p for p in rows.snapshots if p.request == r]
                cuts = tuple(p.row + 1 for p in points)
                scan = ssd_scan_chunked(*args, state_at=cuts) if n > 1 or points else ssd_scan(*args)
                if points:
                    write_snapshots(states, self.state_layer, [p.entry for p in points],
                                    conv_states_at(xbc[start:end], conv_state, list(cuts)), scan.states)
                conv_slots[slot] = conv_final
                ssm_slots[slot] = scan.final_state
            out[start:end] = scan.output.to(x.dtype)
        if kept_conv is not None:
            keep_verify_states(states, self.state_layer, kept_conv, kept_ssm)
        if paths is not None:  # host-side decisions only
            if rows.num_pending:
                paths.record(VERIFY_PATH)
            if has_committed:
                paths.record(CHUNKED_PATH)
        return self.out_proj(self.norm(out.view(x.shape[0], -1), gate))

    def _verify_batched(self, xbc, dt, a, out, kept_conv, kept_ssm, conv_slots, ssm_slots, rows: StateRows) -> None:
        """Every request a verify row of n tokens: one conv and one scan over all of them, request r's channels,
        heads and B/C groups side by side as extra ones (head r * H + h reads group r * G + h // (H / G), as the
        scan's per-head grouping maps it), which the per-head arithmetic cannot tell from a loop over requests."""
        c = self.config
        num_reqs = len(rows.slots)
        n = xbc.shape[0] // num_reqs
        slots = rows.slot_tensor(xbc.device)  # [num_reqs] the per-step device tensor
        by_token = xbc.view(num_reqs, n, -1).transpose(0, 1).reshape(n, -1)  # [n, B * C], request-major channels
        weight = self.conv1d.weight[:, 0, :].repeat(num_reqs, 1)  # [B * C, kernel]
        bias = None if self.conv1d.bias is None else self.conv1d.bias.repeat(num_reqs)
        conv_out, _, conv_kept = causal_conv(by_token, conv_slots[slots].reshape(-1, c.conv_kernel_size - 1), weight,
                                             keep_states=True, bias=bias, windowed=True)
        xs, b, cc = conv_out.view(n, num_reqs, -1).split(
            [c.intermediate_size, c.num_groups * c.state_size, c.num_groups * c.state_size], dim=-1)  # [n, B, ...]
        scan = ssd_scan(xs.reshape(n, num_reqs * c.num_heads, c.head_dim),
                        dt.view(num_reqs, n, -1).transpose(0, 1).reshape(n, -1), a.repeat(num_reqs),
                        b.reshape(n, num_reqs * c.num_groups, c.state_size),
                        cc.reshape(n, num_reqs * c.num_groups, c.state_size), self.D.repeat(num_reqs),
                        ssm_slots[slots].reshape(-1, c.head_dim, c.state_size), keep_states=True)
        # back to request-major rows: token row r * n + j, pending row r * n + j (uniform rows)
        out.copy_(scan.output.view(n, num_reqs, c.num_heads, c.head_dim).transpose(0, 1).reshape(out.shape))
        kept_conv.copy_(conv_kept.view(n, num_reqs, c.conv_channels, -1).transpose(0, 1).reshape(kept_conv.shape))
        kept_ssm.copy_(scan.states.view(n, num_reqs, c.num_heads, c.head_dim, c.state_size).transpose(0, 1)
                       .reshape(kept_ssm.shape))
