"""tests/support/interpreter_patch_cache.py: under the CPU interpreter a @triton.jit helper called inside a kernel no
longer re-binds triton.language (one binding per launch, as a kernel without helpers), and the kernel's result is
unchanged."""

from __future__ import annotations

import os

import pytest
import torch
import triton
import triton.language as tl

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the CPU interpreter only")


@triton.jit
def _twice(x):
    return x * 2.0


@triton.jit
def _with_helper(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    for _ in range(8):
        x = _twice(x)
    tl.store(out_ptr + offs, x)


@triton.jit
def _without_helper(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 256.0)


def test_a_helper_called_in_a_loop_binds_the_language_once_per_launch(monkeypatch):
    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    from triton.runtime import interpreter

    assert getattr(interpreter._patch_lang, "_specbench_cached", False)  # conftest installed it

    calls = []
    original = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *a: calls.append(1) or original(*a))
    x = torch.arange(16, dtype=torch.float32)
    outs = {}
    for name, kernel in (("helper", _with_helper), ("plain", _without_helper)):
        calls.clear()
        outs[name] = torch.empty_like(x)
        kernel[(3,)](x, outs[name], N=16)
        outs[name + "_calls"] = len(calls)
    assert torch.equal(outs["helper"], x * 256.0) and torch.equal(outs["plain"], x * 256.0)
    assert outs["helper_calls"] == outs["plain_calls"] > 0, outs
