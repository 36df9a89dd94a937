"""Reruns the interpreted kernel tests in a fresh process when this one imported triton before TRITON_INTERPRET=1
(triton binds its jit helpers to the interpreter at import; the other files then skip themselves)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("triton")

from tests.support.interpreted import assert_passes_interpreted  # noqa: E402

from tests.support.kernel_testing import kernels_runnable_here  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(kernels_runnable_here(), reason="the kernel tests run in this process")
def test_interpreted_kernel_tests_pass_in_a_fresh_process():
    stdout = assert_passes_interpreted(str(HERE), "--ignore", __file__)
    assert " passed" in stdout and " skipped" in stdout  # GPU-only tests skip, the rest ran
