"""tests/support/interpreter_np_dtype.py: under the CPU interpreter the numpy dtype of every Triton dtype, block type
and pointer is the original function's, an unknown dtype still raises, and a kernel's result is unchanged."""

from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the CPU interpreter only")

SCALARS = (tl.int1, tl.float16, tl.float32, tl.float64, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32,
           tl.int64, tl.uint64, tl.bfloat16, tl.float8e5, tl.float8e5b16, tl.float8e4nv, tl.float8e4b8,
           tl.float8e4b15)


@triton.jit
def _cast_and_scale(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs).to(tl.float16).to(tl.float32)
    tl.store(out_ptr + offs, (x * 3).to(tl.int32).to(tl.float32) + tl.full([N], 0.5, tl.float32))


def test_every_dtype_gets_the_original_numpy_dtype():
    from triton.runtime import interpreter

    patched = interpreter._get_np_dtype
    assert getattr(patched, "_specbench_cached", False)  # conftest installed it
    original = patched._specbench_original
    for scalar in SCALARS:
        for tt in (scalar, tl.pointer_type(scalar), tl.block_type(scalar, [4]), tl.block_type(scalar, [2, 8]),
                   tl.block_type(tl.pointer_type(scalar), [4])):
            for _ in range(2):  # the first answer and the remembered one
                assert patched(tt) == original(tt), tt
    with pytest.raises(KeyError):
        patched(tl.void)
    with pytest.raises(KeyError):
        original(tl.void)


def test_a_kernel_gives_the_same_result_through_it():
    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    x = torch.linspace(-3, 3, 16)
    out = torch.empty_like(x)
    _cast_and_scale[(2,)](x, out, N=16)
    assert torch.equal(out, (x.half().float() * 3).to(torch.int32).float() + 0.5)
