"""Binds our fused Gated DeltaNet verify kernels (kernels/gated_delta_verify.py) to the layers' plug point
(recurrent/fused_verify.py): `models` sits above both `recurrent` and `kernels`, which may not import each other."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from specbench.errors import SpecbenchError
from specbench.models import fused_kernels
from specbench.recurrent.config import GatedDeltaNetConfig
from specbench.recurrent.fused_verify import DeltaProjections


@functools.cache  # one per layer shape: built on the host every eager forward otherwise
def _dims(config: GatedDeltaNetConfig):
    from specbench.kernels.gated_delta_verify import DeltaVerifyDims

    return DeltaVerifyDims(config.num_k_heads, config.k_dim, config.num_v_heads, config.v_dim)


def _inputs(config: GatedDeltaNetConfig, p: DeltaProjections):
    from specbench.kernels.gated_delta_verify import DeltaInputs

    dims = _dims(config)
    if config.is_split_projections:
        return DeltaInputs.split(p.qkv, p.z, p.b, p.a, dims)
    return DeltaInputs.interleaved(p.qkvz, p.ba, dims)


class TritonDeltaVerify:
    """recurrent/fused_verify.py FusedVerify on kernels/gated_delta_verify.py (imported on first use: the first
    `import triton` fixes its interpreter mode)."""

    def verify(self, config, projections, a_log, dt_bias, conv_slots, rec_slots, slots, conv_weight, core,
               kept_conv, kept_rec) -> None:
        from specbench.kernels.gated_delta_verify import gated_delta_verify

        gated_delta_verify(_inputs(config, projections), a_log, dt_bias, conv_slots, rec_slots, slots, conv_weight,
                           _dims(config), core, kept_conv, kept_rec)

    def project(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Our gemv kernel (kernels/gemv.py: one weight pass, no split-K reduce) for the decode and verify batches it
        takes; cuBLAS past them. At one token cuBLAS took 5-9 us for these projections on the H100 (session 22's
        profile), small ones (Qwen3-Next's in_proj_ba, 0.26 MB) at many times their bytes' time."""
        if x.shape[0] <= fused_kernels.gemv_max_tokens() and x.dtype == weight.dtype and x.stride(-1) == 1:
            return fused_kernels.gemv(x, weight)
        return F.linear(x, weight)

    def gated_norm(self, config, core, projections, weight, eps) -> torch.Tensor:
        from specbench.kernels.gated_delta_verify import gated_rms_norm

        return gated_rms_norm(core, _inputs(config, projections), weight, eps, _dims(config))


def check_triton_recurrent_kernels(device: torch.device) -> None:
    """--recurrent-kernels triton where our kernels cannot run (CPU without the Triton interpreter): one line."""
    if device.type == "cuda":
        return
    from specbench.kernels.gated_delta_verify import runs_interpreted
    from specbench.kernels.runtime import CPU_HINT

    if not runs_interpreted():
        raise SpecbenchError(f"--recurrent-kernels triton runs on CUDA (device is {device.type}); use "
                             f"--recurrent-kernels torch ({CPU_HINT})")
