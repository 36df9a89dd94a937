"""Random operands, the reference RMSNorm and a dtype-scaled comparison for the fused projection tests
(tests/kernels/test_kernel_gemv*.py).

On CPU the interpreter runs fp32 and fp16 (its fp32 -> bf16 cast truncates); on CUDA bf16 too. The kernels and the
eager chain differ only in the GEMM's fp32 summation order, so the tolerances are a few 16-bit ulps of the output.
"""

from __future__ import annotations

import torch

from specbench.models.layers import RMSNorm

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])


def inputs(num_tokens: int, out_features: int, in_size: int, dtype: torch.dtype, seed: int, is_gated: bool = False):
    """(x [num_tokens, in_size], weight [rows, in_size], norm weight [in_size], residual [num_tokens, out])."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, device=DEVICE)).to(dtype)

    rows = 2 * out_features if is_gated else out_features
    return (randn(num_tokens, in_size), randn(rows, in_size, scale=in_size ** -0.5),
            1 + randn(in_size, scale=0.1), randn(num_tokens, out_features))


def reference_norm(x: torch.Tensor, norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    norm = RMSNorm(x.shape[-1], eps).to(x.device, x.dtype)
    norm.weight.data.copy_(norm_weight)
    return norm.reference(x)


def assert_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype and not got.isnan().any()
    scale = expected.float().abs().max().item()
    tol = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[got.dtype]
    torch.testing.assert_close(got.float(), expected.float(), atol=tol * scale, rtol=tol)
