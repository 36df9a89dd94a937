"""tests/support/interpreter_overflow_check.py: under the CPU interpreter an int op's overflow check runs where its
verdict is used (debug) and is skipped where device_assert drops it, and a kernel's result is unchanged."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch
import triton
import triton.language as tl

from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the CPU interpreter only")


@triton.jit
def _strided_gather(x_ptr, out_ptr, stride, N: tl.constexpr):
    # int32 add, sub and mul on the offsets: each one an overflow-check site
    offs = tl.arange(0, N)
    src = (offs * stride + 1 - 1) % 37
    tl.store(out_ptr + offs, tl.load(x_ptr + src))


def _run() -> torch.Tensor:
    x = torch.arange(37, dtype=torch.float32) * 0.5
    out = torch.empty(16)
    _strided_gather[(1,)](x, out, 5, N=16)
    assert torch.equal(out, x[(torch.arange(16) * 5) % 37])
    return out


@pytest.fixture
def overflow_verdicts(monkeypatch) -> list[str]:
    """The messages of the overflow checks that reach device_assert during a test."""
    from triton.runtime import interpreter

    semantic = interpreter.interpreter_semantic
    verdicts: list[str] = []
    device_assert = semantic.device_assert

    def recording(cond, msg, mask):
        if "overflow detected" in msg:
            verdicts.append(msg)
            return None  # the verdict is the test's; the interpreter's assert of a whole block is not
        return device_assert(cond, msg, mask)

    monkeypatch.setattr(semantic, "device_assert", recording)
    return verdicts


def test_installed_by_conftest():
    from triton.runtime import interpreter

    patched = interpreter.interpreter_semantic.binary_op_sanitize_overflow_impl
    assert getattr(patched, "_specbench_skipping", False)
    assert not interpreter.interpreter_builder.options.debug  # what makes the skipped verdict a dropped one


def test_the_check_is_skipped_without_debug_and_the_kernel_result_is_unchanged(overflow_verdicts):
    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    _run()
    assert overflow_verdicts == []


def test_with_debug_on_every_int_op_is_checked_as_before(overflow_verdicts, monkeypatch):
    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    monkeypatch.setattr(builder, "options", dataclasses.replace(builder.options, debug=True))
    _run()
    ops = {msg.rsplit(" ", 1)[-1] for msg in overflow_verdicts}
    assert {"add", "sub", "mul"} <= ops, overflow_verdicts
