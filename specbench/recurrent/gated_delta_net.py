"""A Gated DeltaNet token mixer (Qwen3-Next `linear_attn`), over a ragged batch, with per-request state slots.

Projections run over the whole batch; the short convolution and the delta rule run request by request from the
request's slot (recurrent/state_cache.py). Parameter names are the checkpoint's, so the loader maps them 1:1.
The rule runs our torch forms, fused kernels bound to the layer (triton: recurrent/fused_verify.py) or fla-core's
kernels (the model's `recurrent_kernels`, recurrent/kernel_choice.py);
the conv is ours either way. A tree verify (StateRows.tree) runs every row from its parent's state instead
(recurrent/tree_verify.py; torch only).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specbench.errors import SpecbenchError
from specbench.recurrent import fla_kernels
from specbench.recurrent.causal_conv import causal_conv, conv_states_at
from specbench.recurrent.config import GatedDeltaNetConfig
from specbench.recurrent.fused_verify import DeltaProjections
from specbench.recurrent.gated_delta_chunked import gated_delta_rule_chunked
from specbench.recurrent.gated_delta_rule import DeltaRuleOutput, gated_delta_rule
from specbench.recurrent.kernel_choice import (
    CHUNK_PATH,
    FLA,
    RECURRENT_PATH,
    TRITON,
    TRITON_VERIFY_PATH,
    RunsRecurrentKernels,
)
from specbench.recurrent.mixer import RecurrentMixer, keep_verify_states, write_snapshots
from specbench.recurrent.mixer import is_uniform_verify as _is_uniform_verify  # a module name tests patch
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_rows import StateRows
from specbench.recurrent.tree_verify import HYBRID_TREE_FLA_REFUSAL, tree_verify


class GatedRMSNorm(nn.Module):
    """RMSNorm of each head's output, then times silu(z) (transformers' Qwen3NextRMSNormGated)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))  # [v_dim]

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:  # [n, v_dim] each -> [n, v_dim]
        x32 = x.float()
        normed = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        return (self.weight * normed * F.silu(gate.float())).to(x.dtype)


class GatedDeltaNet(RunsRecurrentKernels, RecurrentMixer):  # recurrent_kernels: set per model (set_recurrent_kernels)
    def __init__(self, config: GatedDeltaNetConfig, hidden_size: int, eps: float, state_layer: int) -> None:
        super().__init__()
        self.config = config
        self.state_layer = state_layer  # index of this layer's state in the StateCache
        c = config
        if c.is_split_projections:  # Qwen3.5: [q | k | v] in the conv's channel order, z, b, a by value head
            self.in_proj_qkv = nn.Linear(hidden_size, c.conv_channels, bias=False)
            self.in_proj_z = nn.Linear(hidden_size, c.value_size, bias=False)
            self.in_proj_b = nn.Linear(hidden_size, c.num_v_heads, bias=False)
            self.in_proj_a = nn.Linear(hidden_size, c.num_v_heads, bias=False)
        else:
            # Qwen3-Next's fused layout: per key head [q (k_dim) | k (k_dim) | v (group * v_dim) | z (group * v_dim)]
            self.in_proj_qkvz = nn.Linear(hidden_size, 2 * c.key_size + 2 * c.value_size, bias=False)
            # per key head [b (group) | a (group)]
            self.in_proj_ba = nn.Linear(hidden_size, 2 * c.num_v_heads, bias=False)
        self.conv1d = nn.Conv1d(c.conv_channels, c.conv_channels, c.conv_kernel_size, groups=c.conv_channels,
                                bias=False, padding=c.conv_kernel_size - 1)
        self.dt_bias = nn.Parameter(torch.ones(c.num_v_heads))  # [num_v_heads]
        self.A_log = nn.Parameter(torch.zeros(c.num_v_heads))  # [num_v_heads] log of the decay rate
        self.norm = GatedRMSNorm(c.v_dim, eps)
        self.out_proj = nn.Linear(c.value_size, hidden_size, bias=False)

    def _inputs(self, x: torch.Tensor):  # x [n, hidden]
        """The input projections -> q, k [n, Hk*Dk]; v, z [n, Hv, Dv]; b, a [n, Hv], either layout."""
        c, n = self.config, x.shape[0]
        if c.is_split_projections:
            q, k, v = self.in_proj_qkv(x).split([c.key_size, c.key_size, c.value_size], dim=-1)
            return (q, k, v.reshape(n, c.num_v_heads, c.v_dim), self.in_proj_z(x).view(n, c.num_v_heads, c.v_dim),
                    self.in_proj_b(x), self.in_proj_a(x))
        return self._split(self.in_proj_qkvz(x), self.in_proj_ba(x))

    def _split(self, qkvz: torch.Tensor, ba: torch.Tensor):
        """HF's per-key-head interleaving -> q, k [n, Hk*Dk]; v, z [n, Hv, Dv]; b, a [n, Hv]."""
        c, n = self.config, qkvz.shape[0]
        group = c.num_v_heads // c.num_k_heads
        per_head = qkvz.view(n, c.num_k_heads, -1)
        q, k, v, z = per_head.split([c.k_dim, c.k_dim, group * c.v_dim, group * c.v_dim], dim=-1)
        b, a = ba.view(n, c.num_k_heads, 2 * group).split([group, group], dim=-1)
        return (q.reshape(n, -1), k.reshape(n, -1), v.reshape(n, c.num_v_heads, c.v_dim),
                z.reshape(n, c.num_v_heads, c.v_dim), b.reshape(n, c.num_v_heads), a.reshape(n, c.num_v_heads))

    def forward(
        self,
        x: torch.Tensor,  # [num_tokens, hidden] normed layer input
        query_start_loc_cpu: tuple[int, ...],  # [num_reqs + 1]
        states: StateCache,
        rows: StateRows,  # each request's slot, and whether its rows are verify rows
        paths=None,  # execution_paths.PathRecorder of the engine (its attention backend's), or None
    ) -> torch.Tensor:  # [num_tokens, hidden]
        c = self.config
        if self.recurrent_kernels == TRITON and rows.tree is None and _is_uniform_verify(rows, query_start_loc_cpu):
            return self._forward_fused(x, states, rows, paths)
        is_fla = self.recurrent_kernels == FLA
        q, k, v, z, b, a = self._inputs(x)
        mixed = torch.cat([q, k, v.reshape(v.shape[0], -1)], dim=-1)  # [n, conv_channels]
        beta = b.sigmoid()  # in the model's dtype, as transformers rounds it; the rule computes in fp32
        log_decay = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias.float())  # [n, Hv]
        weight = self.conv1d.weight[:, 0, :]  # [C, kernel]
        out = torch.empty(x.shape[0], c.num_v_heads, c.v_dim, dtype=x.dtype, device=x.device)
        conv_slots, rec_slots = states.conv[self.state_layer], states.recurrent[self.state_layer]
        if rows.tree is not None:
            self._verify_tree(mixed, log_decay, beta, weight, out, states, rows)
            return self._project(out, z)
        kept_conv = kept_rec = None
        if rows.num_pending:  # [num_pending, C, W], [num_pending, Hv, Dk, Dv] fp32
            kept_conv, kept_rec = states.kept_rows(self.state_layer, rows.num_pending)
        is_batched = _is_uniform_verify(rows, query_start_loc_cpu)
        if is_batched:
            self._verify_batched(mixed, log_decay, beta, out, kept_conv, kept_rec, conv_slots, rec_slots, rows)
        deferred: list[_CommittedRows] = []  # fla: committed rows of every request in one varlen call, after the loop
        for r, slot in enumerate(() if is_batched else rows.slots):
            start, end = query_start_loc_cpu[r], query_start_loc_cpu[r + 1]
            if start == end:
                continue
            is_fresh = rows.starts_fresh[r]  # a (re)prefill from the first token: nothing carried over
            conv_state = torch.zeros_like(conv_slots[slot]) if is_fresh else conv_slots[slot]
            rec_state = torch.zeros_like(rec_slots[slot]) if is_fresh else rec_slots[slot]
            keep = rows.keeps_positions[r]
            conv_out, conv_final, conv_kept = causal_conv(mixed[start:end], conv_state, weight, keep_states=keep)
            qc, kc, vc = conv_out.split([c.key_size, c.key_size, c.value_size], dim=-1)
            n = end - start
            # committed rows crossing block boundaries: the states there go to the snapshot store too
            points = () if keep else tuple(p for p in rows.snapshots if p.request == r)
            # committed tokens (prefill, chunks) keep no per-position state: the chunked form; verify rows the
            # per-token reference, which keeps each position's state for the commit
            args = (qc.view(n, c.num_k_heads, c.k_dim), kc.view(n, c.num_k_heads, c.k_dim),
                    vc.view(n, c.num_v_heads, c.v_dim), log_decay[start:end], beta[start:end], rec_state)
            if is_fla and not keep:  # snapshot conv states now: the slot's conv state moves on below
                cuts = tuple(p.row + 1 for p in points)
                deferred.append(_CommittedRows(start, end, slot, args, cuts, tuple(p.entry for p in points)))
                if points:
                    self._snapshot(states, list(deferred[-1].entries),
                                   conv_states_at(mixed[start:end], conv_state, list(cuts)), None)
                conv_slots[slot] = conv_final
                continue
            if is_fla and keep:
                rule = _fla_one_verify(*args)
            else:
                rule = gated_delta_rule(*args, keep_states=True) if keep else (
                    gated_delta_rule_chunked(*args, state_at=tuple(p.row + 1 for p in points)) if n > 1 or points
                    else gated_delta_rule(*args))
            out[start:end] = rule.output.to(x.dtype)
            if keep:
                p = rows.pending_starts[r]
                kept_conv[p : p + n] = conv_kept
                kept_rec[p : p + n] = rule.states
            else:  # committed tokens: the slot moves on now
                if points:
                    self._snapshot(states, [p.entry for p in points],
                                   conv_states_at(mixed[start:end], conv_state, [p.row + 1 for p in points]),
                                   rule.states)
                conv_slots[slot] = conv_final
                rec_slots[slot] = rule.final_state
        if deferred:
            for rows_r, at_cuts in zip(deferred, _fla_committed(deferred, out, rec_slots)):
                if rows_r.entries:
                    self._snapshot(states, list(rows_r.entries), None, at_cuts)
        if is_fla and paths is not None:  # host-side decisions only: which fla kernels this forward ran
            if deferred:
                paths.record(CHUNK_PATH)
            if rows.num_pending:
                paths.record(RECURRENT_PATH)
        if kept_conv is not None:
            keep_verify_states(states, self.state_layer, kept_conv, kept_rec)
        return self._project(out, z)

    def _project(self, out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The rule's output [n, Hv, Dv] normed per head, gated by z [n, Hv, Dv], projected back: [n, hidden]."""
        c = self.config
        normed = self.norm(out.reshape(-1, c.v_dim), z.reshape(-1, c.v_dim)).view(out.shape[0], -1)
        return self.out_proj(normed)

    def _verify_tree(self, mixed, log_decay, beta, weight, out, states: StateCache, rows: StateRows) -> None:
        """A tree verify (every request a verify row of its root and nodes): each row's state continues its parent's
        (recurrent/tree_verify.py, torch only: fla's recurrent kernel chains one state per sequence, and trees on
        the fla kernels are refused before any round). Every row's states are kept for the commit."""
        if self.recurrent_kernels == FLA:
            raise SpecbenchError(HYBRID_TREE_FLA_REFUSAL)
        c = self.config
        slots = rows.slot_tensor(mixed.device)  # [num_reqs] the per-step device tensor
        result = tree_verify(mixed, log_decay, beta, weight, states.conv[self.state_layer][slots],
                             states.recurrent[self.state_layer][slots], rows.tree,
                             (c.key_size, c.key_size, c.value_size), (c.num_k_heads, c.k_dim, c.num_v_heads, c.v_dim))
        out.copy_(result.output.to(out.dtype))
        states.keep(self.state_layer, result.conv_states, result.recurrent_states)

    def _snapshot(self, states: StateCache, entries: list[int], conv: torch.Tensor | None,
                  recurrent: torch.Tensor | None) -> None:
        """This layer's states conv [num_points, C, W], recurrent [num_points, Hv, Dk, Dv] into snapshot `entries`
        (None: written by another call; fla: the conv before, the recurrent state after)."""
        write_snapshots(states, self.state_layer, entries, conv, recurrent)

    def _forward_fused(self, x: torch.Tensor, states: StateCache, rows: StateRows, paths) -> torch.Tensor:
        """Uniform verify rows (plain decode, chain verifies: the rows CUDA graphs replay) on the fused kernels bound
        to this layer (`fused_verify`, recurrent/fused_verify.py): its projections, three launches between them,
        every position's states kept for the commit as the torch path keeps them."""
        c = self.config
        project = self.fused_verify.project  # the bound kernels' projections (ours: gemv)
        projections = (DeltaProjections(qkv=project(x, self.in_proj_qkv.weight), z=project(x, self.in_proj_z.weight),
                                        b=project(x, self.in_proj_b.weight), a=project(x, self.in_proj_a.weight))
                       if c.is_split_projections
                       else DeltaProjections(qkvz=project(x, self.in_proj_qkvz.weight),
                                             ba=project(x, self.in_proj_ba.weight)))
        core = torch.empty(x.shape[0], c.num_v_heads, c.v_dim, dtype=x.dtype, device=x.device)
        kept_conv, kept_rec = states.kept_rows(self.state_layer, rows.num_pending)
        self.verify_fused(projections, core, kept_conv, kept_rec, states, rows)
        if paths is not None:  # a host-side decision, made alike at capture and eagerly
            paths.record(TRITON_VERIFY_PATH)
        keep_verify_states(states, self.state_layer, kept_conv, kept_rec)
        return project(self.fused_verify.gated_norm(c, core, projections, self.norm.weight, self.norm.eps),
                       self.out_proj.weight)

    def verify_fused(self, projections: DeltaProjections, core, kept_conv, kept_rec, states: StateCache,
                     rows: StateRows) -> None:
        """The conv and the rule of uniform verify rows from the requests' slots: the rule's output into `core`
        [n, Hv, Dv], every position's states into kept_conv [n, C, W] / kept_rec [n, Hv, Dk, Dv] (the seam the
        state-fused-kept-shifted mutant bends)."""
        self.fused_verify.verify(self.config, projections, self.A_log, self.dt_bias, states.conv[self.state_layer],
                                 states.recurrent[self.state_layer], rows.slot_tensor(projections.device),
                                 self.conv1d.weight[:, 0, :], core, kept_conv, kept_rec)

    def _verify_batched(self, mixed, log_decay, beta, out, kept_conv, kept_rec, conv_slots, rec_slots,
                        rows: StateRows) -> None:
        """Every request a verify row of n tokens (plain decode: n = 1; every request drafting k: n = k + 1): one
        conv and one rule call over all of them, each request's heads (and conv channels) side by side as extra
        heads, which the per-head arithmetic cannot tell from a loop over requests."""
        c = self.config
        num_reqs = len(rows.slots)
        n = mixed.shape[0] // num_reqs
        slots = rows.slot_tensor(mixed.device)  # [num_reqs] the per-step device tensor
        by_token = mixed.view(num_reqs, n, -1).transpose(0, 1).reshape(n, -1)  # [n, B * C], request-major channels
        weight = self.conv1d.weight[:, 0, :].repeat(num_reqs, 1)  # [B * C, kernel]
        conv_out, _, conv_kept = causal_conv(by_token, conv_slots[slots].reshape(-1, c.conv_kernel_size - 1),
                                             weight, keep_states=True)
        conv_out = conv_out.view(n, num_reqs, -1)  # [n, B, C]
        qc, kc, vc = conv_out.split([c.key_size, c.key_size, c.value_size], dim=-1)

        def heads(x: torch.Tensor, num_heads: int, dim: int) -> torch.Tensor:  # [n, B, H * dim] -> [n, B * H, dim]
            return x.reshape(n, num_reqs * num_heads, dim)

        def per_token(x: torch.Tensor) -> torch.Tensor:  # [B * n, H] -> [n, B * H]
            return x.view(num_reqs, n, -1).transpose(0, 1).reshape(n, -1)

        if self.recurrent_kernels == FLA:  # fla takes requests as its batch: [B, n, H, D]
            def by_request(x: torch.Tensor, num_heads: int, dim: int) -> torch.Tensor:  # [n, B, H * dim]
                return x.reshape(n, num_reqs, num_heads, dim).transpose(0, 1)

            fla = fla_kernels.fla_recurrent(
                by_request(qc, c.num_k_heads, c.k_dim), by_request(kc, c.num_k_heads, c.k_dim),
                by_request(vc, c.num_v_heads, c.v_dim), log_decay.view(num_reqs, n, -1), beta.view(num_reqs, n, -1),
                rec_slots[slots])
            out.copy_(fla.output.reshape(out.shape))
            kept_conv.copy_(conv_kept.view(n, num_reqs, c.conv_channels, -1).transpose(0, 1)
                            .reshape(kept_conv.shape))
            kept_rec.copy_(fla.states.reshape(kept_rec.shape))
            return
        rule = gated_delta_rule(heads(qc, c.num_k_heads, c.k_dim), heads(kc, c.num_k_heads, c.k_dim),
                                heads(vc, c.num_v_heads, c.v_dim), per_token(log_decay), per_token(beta),
                                rec_slots[slots].reshape(-1, c.k_dim, c.v_dim), keep_states=True)
        # back to request-major rows: token row r * n + j, pending row r * n + j (uniform rows)
        out.copy_(rule.output.view(n, num_reqs, c.num_v_heads, c.v_dim).transpose(0, 1).reshape(out.shape))
        kept_conv.copy_(conv_kept.view(n, num_reqs, c.conv_channels, -1).transpose(0, 1).reshape(kept_conv.shape))
        kept_rec.copy_(rule.states.view(n, num_reqs, c.num_v_heads, c.k_dim, c.v_dim).transpose(0, 1)
                       .reshape(kept_rec.shape))


@dataclass(frozen=True, slots=True)
class _CommittedRows:
    """One request's committed rows waiting for the fla varlen calls."""

    start: int  # its first token row in the forward
    end: int
    slot: int  # its state slot
    # (q [n, Hk, Dk], k [n, Hk, Dk], v [n, Hv, Dv], log_decay [n, Hv], beta [n, Hv], initial state [Hv, Dk, Dv])
    rule_args: tuple[torch.Tensor, ...]
    cuts: tuple[int, ...] = ()  # [num_points] rows (1-based, increasing) after which a snapshot takes the state
    entries: tuple[int, ...] = ()  # [num_points] their snapshot entries


def _fla_committed(committed: list[_CommittedRows], out: torch.Tensor, rec_slots: torch.Tensor) -> list[torch.Tensor]:
    """fla's chunked kernel over every request's committed rows; outputs into `out` [num_tokens, Hv, Dv], final
    states into the slots [num_slots, Hv, Dk, Dv]. fla returns each sequence's final state only, so a request's rows
    are cut at its snapshot points into segments, and round i runs every request's i-th segment in one varlen call
    from the state the round before left (one round where no request has a point). Returns, per request, the states
    at its cuts [num_points, Hv, Dk, Dv]."""
    segments = [[(a, b) for a, b in zip((0, *r.cuts), (*r.cuts, r.end - r.start)) if b > a] for r in committed]
    state = [r.rule_args[5] for r in committed]  # each request's state entering its next segment
    at_cuts: list[list[torch.Tensor]] = [[] for _ in committed]
    for i in range(max(len(s) for s in segments)):
        live = [r for r, s in enumerate(segments) if i < len(s)]
        pieces = [(r, *segments[r][i]) for r in live]  # (request, first row, end row) relative to the request
        seq_starts = [0]
        for _, a, b in pieces:
            seq_starts.append(seq_starts[-1] + b - a)
        args = [torch.cat([committed[r].rule_args[j][a:b] for r, a, b in pieces]) for j in range(5)]
        result = fla_kernels.fla_chunk(*args, torch.stack([state[r] for r in live]), tuple(seq_starts))
        for k, (r, a, b) in enumerate(pieces):
            rows = committed[r]
            out[rows.start + a : rows.start + b] = result.output[seq_starts[k] : seq_starts[k + 1]].to(out.dtype)
            state[r] = result.final_states[k]
            if b in rows.cuts:
                at_cuts[r].append(state[r])
    for r, rows in enumerate(committed):
        rec_slots[rows.slot] = state[r]
    return [torch.stack(states) if states else None for states in at_cuts]


def _fla_one_verify(query, key, value, log_decay, beta, initial_state) -> DeltaRuleOutput:
    """One request's verify rows (a batch of mixed lengths) through fla's recurrent kernel, as a batch of one; the
    per-token reference's shapes (gated_delta_rule.py)."""
    fla = fla_kernels.fla_recurrent(query[None], key[None], value[None], log_decay[None], beta[None],
                                    initial_state[None])
    return DeltaRuleOutput(fla.output[0], fla.states[0, -1], fla.states[0])
