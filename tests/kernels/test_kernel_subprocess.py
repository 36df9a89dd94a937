"""Reruns the interpreted kernel tests in a fresh process when this one imported triton before TRITON_INTERPRET=1
(triton binds its jit helpers to the interpreter at import; the other files then skip themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from specbench.kernels.testing import kernels_runnable_here  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(kernels_runnable_here(), reason="the kernel tests run in this process")
def test_interpreted_kernel_tests_pass_in_a_fresh_process():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE), "--ignore", __file__],
        cwd=HERE.parents[1], env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " skipped" in result.stdout  # GPU-only tests skip, the rest ran
