"""A mixture-of-experts MLP layer: router, routed experts, optional shared expert (which architecture uses what:
specbench/models/moe_config.py).

`reference` loops over the experts in torch and is the definition; `fused` runs the routed experts as grouped
Triton kernels (kernels/moe_gemv.py) for decode and verify batches of up to 64 tokens. Both share the routing
(moe_routing.py). Weights are kept in one layout whatever the checkpoint's: `gate_up_weight` [E, 2 * inter, hidden]
with each expert's gate rows before its up rows, `down_weight` [E, hidden, inter] (gpt-oss's interleaved,
transposed tensors are converted by `gate_up_from_interleaved` and friends at load).

Roundings: the router runs in fp32 (its logits decide the experts; a 16-bit router would flip near-ties); each
projection's output is rounded to the input dtype as F.linear does; a token's weighted sum over its experts is
accumulated in fp32, in ascending expert order, and rounded once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from specbench.models import fused_kernels
from specbench.models.fused_kernels import UsesFusedKernels
from specbench.models.layers import GatedMLP
from specbench.models.moe_config import MoeConfig
from specbench.models.moe_kernel_sets import PREFILL_GROUPED_SETS, RunsMoeKernels
from specbench.models.moe_routing import ExpertRouting, route

if TYPE_CHECKING:  # the kernels import triton, which must not happen at specbench import (moe_route's note)
    from specbench.kernels.moe_route import RouterNorm


class MoeMLP(nn.Module, UsesFusedKernels, RunsMoeKernels):  # moe_kernels: set per model (set_moe_kernels)
    def __init__(self, config: MoeConfig) -> None:
        super().__init__()
        self.config = config
        num_experts, hidden, inter = config.num_experts, config.hidden_size, config.moe_intermediate_size
        self.router = nn.Linear(hidden, num_experts, bias=config.has_router_bias)  # weight [E, hidden]
        # [E] fp32, selection only: a buffer, kept fp32 when the module is cast (it is added to fp32 scores).
        self.register_buffer("score_correction_bias",
                             torch.zeros(num_experts) if config.has_score_correction_bias else None)
        # [1] int32, zero between launches: the fused routing kernel's count of programs done with the router GEMM
        # (kernels/moe_route.py router_route_sort). This layer's own, so no other launch shares it; not a weight.
        self.register_buffer("route_counter", torch.zeros(1, dtype=torch.int32), persistent=False)
        self.gate_up_weight = nn.Parameter(torch.empty(num_experts, 2 * inter, hidden))  # rows [gate; up]
        self.down_weight = nn.Parameter(torch.empty(num_experts, hidden, inter))
        self.gate_up_bias = nn.Parameter(torch.zeros(num_experts, 2 * inter)) if config.has_expert_bias else None
        self.down_bias = nn.Parameter(torch.zeros(num_experts, hidden)) if config.has_expert_bias else None
        self.shared_expert = GatedMLP(hidden, config.shared_intermediate_size) if config.has_shared_expert else None
        self.shared_expert_gate = nn.Linear(hidden, 1, bias=False) if config.is_shared_expert_gated else None
        if not self.gate_up_weight.is_meta:  # built on meta (a model's layers): no values to fill, and normal_
            # there runs a reference implementation that imports torch._dynamo (~1 s the first time in a process)
            nn.init.normal_(self.gate_up_weight, std=hidden ** -0.5)
            nn.init.normal_(self.down_weight, std=inter ** -0.5)

    def _apply(self, fn, recurse=True):
        # The correction bias follows the module's device but keeps its fp32 values through a dtype cast.
        kept = self.score_correction_bias
        super()._apply(fn, recurse)
        # Zero whatever the move made of it (to_empty: uninitialised memory); it is zero between launches anyway.
        self.route_counter = torch.zeros(1, dtype=torch.int32, device=self.route_counter.device)
        if kept is not None:
            device = self.score_correction_bias.device
            # Materialised from meta (to_empty): fresh fp32 memory, filled by the loader or init_random_weights.
            self.score_correction_bias = (torch.empty(kept.shape, dtype=kept.dtype, device=device) if kept.is_meta
                                          else kept.to(device))
        return self

    def route(
        self,
        x: torch.Tensor,  # [num_tokens, hidden]
        is_real_token: torch.Tensor | None = None,  # [num_tokens] bool; False: a padded row of a graph batch
    ) -> ExpertRouting:
        logits = F.linear(x.float(), self.router.weight.float(),
                          None if self.router.bias is None else self.router.bias.float())
        return route(self.config, logits, self.score_correction_bias, is_real_token)

    def forward(
        self,
        x: torch.Tensor,  # [num_tokens, hidden]
        is_real_token: torch.Tensor | None = None,  # [num_tokens] bool; padded rows never affect real rows
        *,
        # The Triton path (CUDA, or CPU under TRITON_INTERPRET=1): at most 64 tokens, or any number under the
        # "grouped" kernel set (past 64 tokens: torch routing, then the grouped GEMM over experts).
        is_fused: bool = False,
        # With is_fused, at most 64 tokens: x is the layer's stream before its norm, which (with the residual add)
        # rides in the routing kernel; the experts read norm.normed (models/moe_forward.py normed_moe_forward).
        norm: RouterNorm | None = None,
    ) -> torch.Tensor:  # [num_tokens, hidden]
        if norm is not None and (not is_fused or self._is_prefill_grouped(x)):
            raise ValueError("a MoE layer takes its norm in the routing kernel on the fused path only")
        if is_fused and self._is_prefill_grouped(x):
            routed = self.prefill_experts(x, self.route(x, is_real_token))
        elif is_fused:
            routing, order = self.fused_route(x, is_real_token, norm)
            if norm is not None:
                x = norm.normed
            routed = self.fused_experts(x, routing, order)
            if self._is_shared_fused(x):
                # The shared expert as gemvs: gate_up with SiLU-and-mul, then down. Ungated (GLM-4.5, DeepSeek-V3),
                # the routed sum is added in the down projection's epilogue: two kernels where the eager chain runs
                # four (two GEMMs, SiLU-and-mul, add). Gated (Qwen2-MoE, Qwen3-Next), the gate's one-row projection
                # is a gemv too and its sigmoid, product and sum stay torch's, rounded where the eager module rounds
                # (cuBLAS ran those GEMMs split-K with a reduce kernel each at one token).
                shared = self.shared_expert
                act = fused_kernels.gemv(x, shared.gate_up_proj.weight, is_gated=True)
                if self.shared_expert_gate is None:
                    return fused_kernels.gemv(act, shared.down_proj.weight, residual=routed)
                out = fused_kernels.gemv(act, shared.down_proj.weight)
                return routed + torch.sigmoid(fused_kernels.gemv(x, self.shared_expert_gate.weight)) * out
        else:
            routed = self.reference_experts(x, self.route(x, is_real_token))
        return routed + self.shared(x) if self.shared_expert is not None else routed

    def _is_prefill_grouped(self, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]; shapes only
        from specbench.kernels.moe_gemv import MAX_TOKENS

        return self.moe_kernels in PREFILL_GROUPED_SETS and x.shape[0] > MAX_TOKENS

    def _is_shared_fused(self, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]; shapes and dtypes only
        shared = self.shared_expert
        return (shared is not None and shared.activation == "silu"
                and x.dtype == shared.gate_up_proj.weight.dtype and x.shape[0] <= fused_kernels.gemv_max_tokens())

    def shared(self, x: torch.Tensor) -> torch.Tensor:  # [num_tokens, hidden] -> same
        out = self.shared_expert(x)
        if self.shared_expert_gate is not None:
            out = torch.sigmoid(self.shared_expert_gate(x)) * out
        return out

    def activation(self, gate_up: torch.Tensor) -> torch.Tensor:  # [n, 2 * inter] -> [n, inter]
        gate, up = gate_up.chunk(2, dim=-1)
        if self.config.activation == "silu":
            return F.silu(gate) * up
        limit = self.config.swiglu_limit
        gate = gate.clamp(max=limit)
        up = up.clamp(min=-limit, max=limit)
        return (up + 1) * (gate * torch.sigmoid(gate * self.config.swiglu_alpha))

    def reference_experts(self, x: torch.Tensor, routing: ExpertRouting) -> torch.Tensor:  # [num_tokens, hidden]
        """The definition: each expert on the tokens routed to it, weighted and summed per token."""
        out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        for expert in range(self.config.num_experts):
            tokens, slots = (routing.topk_ids == expert).nonzero(as_tuple=True)
            if tokens.numel() == 0:
                continue
            gate_up = F.linear(x[tokens], self.gate_up_weight[expert],
                               None if self.gate_up_bias is None else self.gate_up_bias[expert])
            y = F.linear(self.activation(gate_up), self.down_weight[expert],
                         None if self.down_bias is None else self.down_bias[expert])
            out.index_add_(0, tokens, y.float() * routing.topk_weights[tokens, slots, None])
        return out.to(x.dtype)

    def fused_route(
        self,
        x: torch.Tensor,  # [num_tokens, hidden]
        is_real_token: torch.Tensor | None = None,  # [num_tokens] bool
        norm: RouterNorm | None = None,  # x is the norm's input; the kernel writes norm.normed (and norm.stream)
    ):  # -> (ExpertRouting, kernels.moe_sort.ExpertSort)
        """The router GEMM, `route` and the sort by expert in one launch (kernels/moe_route.py): the same experts,
        logits up to the order of the fp32 sum, weights up to the rounding of exp and division. A seam for
        faults/moe_route_norm_half_written.py."""
        # Imported on first use, never at specbench import: the first `import triton` fixes its interpreter mode.
        from specbench.kernels.moe_route import router_route_sort

        c = self.config
        topk_ids, topk_weights, order = router_route_sort(
            x if x.stride(-1) == 1 else x.contiguous(), self.router.weight, self.router.bias, self.route_counter,
            top_k=c.num_experts_per_tok, scoring=c.scoring, norm_topk_prob=c.norm_topk_prob,
            routed_scaling_factor=c.routed_scaling_factor, correction_bias=self.score_correction_bias,
            is_real_token=is_real_token, norm=norm)
        return ExpertRouting(topk_ids=topk_ids, topk_weights=topk_weights), order

    def fused_experts(self, x: torch.Tensor, routing: ExpertRouting, order=None) -> torch.Tensor:  # [num_tokens, hidden]
        """`order`: the routing's ExpertSort if already made (fused_route); else the kernels sort (tensor-core tiles;
        one-token tiles read topk_ids directly)."""
        from specbench.kernels.moe_down_combine import FEW_MAX_TOKENS
        from specbench.kernels.moe_gemv import expert_gemv

        if self.moe_kernels == "grouped" and 2 <= x.shape[0] <= FEW_MAX_TOKENS:
            return self.few_token_experts(x, routing, order)
        return expert_gemv(
            x, routing.topk_ids, routing.topk_weights, self.gate_up_weight, self.down_weight,
            gate_up_bias=self.gate_up_bias, down_bias=self.down_bias,
            is_swiglu_oai=self.config.activation == "swiglu_oai",
            swiglu_alpha=self.config.swiglu_alpha, swiglu_limit=self.config.swiglu_limit, order=order,
        )

    def _expert_args(self) -> dict:
        c = self.config
        return {"gate_up_bias": self.gate_up_bias, "down_bias": self.down_bias,
                "is_swiglu_oai": c.activation == "swiglu_oai", "swiglu_alpha": c.swiglu_alpha,
                "swiglu_limit": c.swiglu_limit}

    def few_token_experts(self, x: torch.Tensor, routing: ExpertRouting, order=None) -> torch.Tensor:
        """2 to 16 tokens under the "grouped" set: each active expert's weights read once for all its tokens, the
        combine in the down kernel's epilogue (kernels/moe_few_token.py). A seam for the mutants
        (faults/moe_combine_weight_swapped.py, faults/moe_verify_rows_shared.py)."""
        from specbench.kernels.moe_few_token import few_token_experts

        return few_token_experts(x, routing.topk_ids, routing.topk_weights, self.gate_up_weight, self.down_weight,
                                 order=order, **self._expert_args())

    def prefill_experts(self, x: torch.Tensor, routing: ExpertRouting, sort=None) -> torch.Tensor:
        """Past 64 tokens under the "grouped" set: the grouped GEMM over experts (kernels/moe_prefill.py). `sort`:
        the slots' sort by expert (default kernels/moe_prefill.prefill_sort; a seam for
        faults/moe_prefill_rows_shifted.py)."""
        from specbench.kernels.moe_prefill import prefill_experts, prefill_sort

        return prefill_experts(x, routing.topk_ids, routing.topk_weights, self.gate_up_weight, self.down_weight,
                               sort=sort or prefill_sort, **self._expert_args())


def gate_up_from_interleaved(weight: torch.Tensor) -> torch.Tensor:
    """gpt-oss's [E, hidden, 2 * inter] with gate and up columns alternating -> [E, 2 * inter, hidden], [gate; up]."""
    return torch.cat([weight[..., ::2], weight[..., 1::2]], dim=-1).transpose(1, 2).contiguous()


def gate_up_bias_from_interleaved(bias: torch.Tensor) -> torch.Tensor:  # [E, 2 * inter] alternating -> [gate; up]
    return torch.cat([bias[..., ::2], bias[..., 1::2]], dim=-1).contiguous()


def down_from_transposed(weight: torch.Tensor) -> torch.Tensor:  # gpt-oss's [E, inter, hidden] -> [E, hidden, inter]
    return weight.transpose(1, 2).contiguous()
