"""Fused RMSNorm (+ residual add) and in-place RoPE == the eager layers: 16-bit bit for bit where the platform
rounds like torch (fp16 everywhere, bf16 on CUDA: the CPU interpreter truncates fp32 -> bf16), else within tolerance."""

from __future__ import annotations


import pytest
import torch

pytest.importorskip("triton")

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here, poisoned_allocations  # noqa: E402

pytestmark = pytest.mark.skipif(not kernels_runnable_here(), reason=RERUN_REASON)

from specbench.kernels.rms_norm import rms_norm  # noqa: E402
from specbench.kernels.rope import apply_rope_  # noqa: E402
from specbench.models.config import RopeScaling  # noqa: E402
from specbench.models.layers import OffsetRMSNorm, RMSNorm, RotaryEmbedding  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def assert_close_to_eager(got: torch.Tensor, expected: torch.Tensor, *, exact_16bit: bool) -> None:
    assert not got.isnan().any()
    if exact_16bit and (got.dtype == torch.float16 or (got.dtype == torch.bfloat16 and got.is_cuda)):
        assert torch.equal(got, expected)
    else:
        tol = {torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 8e-3}[got.dtype]
        torch.testing.assert_close(got, expected, atol=tol * expected.abs().max().item(), rtol=tol)


def make_norm(hidden: int, dtype: torch.dtype, device: str, seed: int,
              norm_class: type[RMSNorm] = RMSNorm) -> tuple[RMSNorm, torch.Generator]:
    gen = torch.Generator(device=device).manual_seed(seed)
    norm = norm_class(hidden, 1e-5).to(device=device, dtype=dtype)
    # OffsetRMSNorm stores weight - 1 (it multiplies by 1 + weight): both scale rows by ~1 +- 0.3
    norm.weight.data = (norm_class is RMSNorm) + 0.3 * torch.randn(hidden, generator=gen, device=device).to(dtype)
    return norm, gen


def check_rms_norm(num_rows: int, hidden: int, dtype: torch.dtype, device: str, seed: int,
                   norm_class: type[RMSNorm] = RMSNorm) -> None:
    norm, gen = make_norm(hidden, dtype, device, seed, norm_class)
    is_offset = norm_class is OffsetRMSNorm
    x = (3 * torch.randn(num_rows, hidden, generator=gen, device=device)).to(dtype)
    residual = torch.randn(num_rows, hidden, generator=gen, device=device).to(dtype)
    expected_sum = residual + x
    with poisoned_allocations():
        out, no_residual = rms_norm(x, norm.weight, norm.eps, is_offset=is_offset)
        fused_out, fused_sum = rms_norm(x, norm.weight, norm.eps, residual, is_offset=is_offset)
    assert no_residual is None
    # rsqrt and the sum order differ from torch's: the norm is close, not always bit-equal. The yardstick is the
    # layer's torch code (`reference`), never its forward (which may take this kernel).
    assert_close_to_eager(out, norm.reference(x), exact_16bit=False)
    assert_close_to_eager(fused_sum, expected_sum, exact_16bit=True)
    assert_close_to_eager(fused_out, norm.reference(expected_sum), exact_16bit=False)
    in_place = residual.clone()
    rms_norm(x, norm.weight, norm.eps, in_place, residual_out=in_place, is_offset=is_offset)
    assert torch.equal(in_place, fused_sum)
    if is_offset:  # the weighting is the offset form's, not Llama's (which would multiply by weight - 1)
        llama = rms_norm(x, norm.weight, norm.eps)[0]
        assert (llama.float() - out.float()).abs().max() > 0.1


def check_rope(num_tokens: int, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype, device: str,
               seed: int) -> None:
    gen = torch.Generator(device=device).manual_seed(seed)
    rotary = RotaryEmbedding(head_dim, 500000.0, RopeScaling("llama3", 8.0, 1.0, 4.0, 8192))
    positions = torch.randint(0, 3000, (num_tokens,), generator=gen, device=device)
    cos_sin = rotary.cos_sin(positions, 3000)
    qkv = torch.randn(num_tokens, (num_heads + 2 * num_kv_heads) * head_dim, generator=gen, device=device).to(dtype)
    q, k, _ = qkv.split([num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim], dim=-1)
    q, k = q.view(num_tokens, num_heads, head_dim), k.view(num_tokens, num_kv_heads, head_dim)  # strided views
    expected_q, expected_k = RotaryEmbedding.apply(q, cos_sin), RotaryEmbedding.apply(k, cos_sin)
    untouched = qkv[:, (num_heads + num_kv_heads) * head_dim:].clone()
    original = qkv.clone()
    apply_rope_(q, k, positions, rotary._cos_sin)
    assert_close_to_eager(q, expected_q, exact_16bit=True)
    assert_close_to_eager(k, expected_k, exact_16bit=True)
    assert torch.equal(qkv[:, (num_heads + num_kv_heads) * head_dim:], untouched)  # v never written
    # Rows already gathered per token (what the model layers pass): the same rotation.
    rotated = qkv.clone()
    qkv.copy_(original)
    apply_rope_(q, k, None, cos_sin)
    assert torch.equal(qkv, rotated)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_rows, hidden", [(5, 64), (3, 96)])
def test_rms_norm_matches_eager(num_rows, hidden, dtype):
    check_rms_norm(num_rows, hidden, dtype, DEVICE, seed=hidden)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_rows, hidden", [(5, 64), (4, 256)])
def test_offset_rms_norm_matches_the_offset_layers_torch_code(num_rows, hidden, dtype):
    """Gemma's and Qwen3-Next's x / rms(x) * (1 + weight) in fp32, rounded once (layers.OffsetRMSNorm)."""
    check_rms_norm(num_rows, hidden, dtype, DEVICE, seed=hidden + 1, norm_class=OffsetRMSNorm)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_heads, num_kv_heads, head_dim", [(4, 2, 16), (6, 2, 24)])
def test_rope_matches_eager(num_heads, num_kv_heads, head_dim, dtype):
    check_rope(7, num_heads, num_kv_heads, head_dim, dtype, DEVICE, seed=head_dim)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_rows", [1, 64, 2048])
def test_gpu_llama8b_shapes(num_rows, dtype):
    check_rms_norm(num_rows, 4096, dtype, "cuda", seed=num_rows)
    check_rms_norm(num_rows, 2048, dtype, "cuda", seed=num_rows, norm_class=OffsetRMSNorm)  # Qwen3-Next's
    check_rope(num_rows, 32, 8, 128, dtype, "cuda", seed=num_rows)
