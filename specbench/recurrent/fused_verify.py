"""The plug point for fused uniform-verify kernels of a Gated DeltaNet layer (--recurrent-kernels triton): what the
layer hands them and what they must write. The layer knows only this interface; models/recurrent_kernels.py binds
ours (kernels/gated_delta_verify.py) when the model is loaded, so `recurrent` never imports `kernels` (one import
layer: tests/test_import_layers.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from specbench.recurrent.config import GatedDeltaNetConfig


@dataclass(frozen=True, slots=True)
class DeltaProjections:
    """A Gated DeltaNet layer's input projections of one forward, in the checkpoint's layout
    (GatedDeltaNetConfig.is_split_projections): Qwen3-Next's `qkvz` [n, Hk * (2 Dk + 2 group Dv)] and `ba`
    [n, Hk * 2 group] interleaved per key head; Qwen3.5's `qkv` [n, C] (the conv's order), `z` [n, Hv * Dv],
    `b` and `a` [n, Hv]. The fields of the other layout are None."""

    qkvz: torch.Tensor | None = None
    ba: torch.Tensor | None = None
    qkv: torch.Tensor | None = None
    z: torch.Tensor | None = None
    b: torch.Tensor | None = None
    a: torch.Tensor | None = None

    @property
    def device(self) -> torch.device:
        return (self.qkvz if self.qkvz is not None else self.qkv).device


class FusedVerify(Protocol):
    """Every request of the forward a verify row of n = rows / num_reqs tokens, from its slot."""

    def verify(
        self,
        config: GatedDeltaNetConfig,
        projections: DeltaProjections,
        a_log: torch.Tensor,  # [Hv]
        dt_bias: torch.Tensor,  # [Hv]
        conv_slots: torch.Tensor,  # [num_slots, C, W] the layer's conv states
        rec_slots: torch.Tensor,  # [num_slots, Hv, Dk, Dv] fp32 the layer's recurrent states
        slots: torch.Tensor,  # [num_reqs] int64
        conv_weight: torch.Tensor,  # [C, W + 1]
        core: torch.Tensor,  # [rows, Hv, Dv] written: the rule's output
        kept_conv: torch.Tensor,  # [rows, C, W] written: the conv state after each row
        kept_rec: torch.Tensor,  # [rows, Hv, Dk, Dv] fp32 written: the recurrent state after each row
    ) -> None: ...

    def project(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:  # x [rows, in], weight [out, in]
        """x @ weight.T: the layer's input and output projections of these rows (no biases)."""
        ...

    def gated_norm(self, config: GatedDeltaNetConfig, core: torch.Tensor, projections: DeltaProjections,
                   weight: torch.Tensor, eps: float) -> torch.Tensor:  # [rows, Hv * Dv]
        ...
