"""The kernel variants of issue 45/47's session-25 fusions compile for the H100 (sm90) where CI runs, without a GPU
(tests/support/hopper_compile.py): the routing kernel with its norm prologue (kernels/moe_route.py), the q/k norm +
RoPE kernel in the gated, offset, partial-rotary layout and Qwen3's (kernels/qk_norm_rope.py), the gemv with its
input gate on the CUDA cores and the tensor cores (kernels/gemv.py). The kernel tests run their semantics under the
CPU interpreter; this checks what only the compiler checks. One child process compiles every case (~10 s cold)."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from tests.support.hopper_cases import CASES  # noqa: E402
from tests.support.hopper_compile import run_cases  # noqa: E402


def _has_nvidia_backend() -> bool:
    try:
        from triton.backends import backends
    except ImportError:
        return False
    return "nvidia" in backends


pytestmark = [pytest.mark.slow,  # ~22 s cold on a 2-core box (ptxas)
              pytest.mark.skipif(not _has_nvidia_backend(), reason="triton without its nvidia backend")]


@pytest.fixture(scope="module")
def results():
    return run_cases(list(CASES))


@pytest.mark.parametrize("case", [c for c in CASES if not c.startswith("guard")])
def test_kernel_variant_compiles_for_hopper(results, case):
    assert results[case] == "ok", results[case]


def test_a_kernel_the_compiler_refuses_fails_here(results):
    assert results["guard-retyped-if"] != "ok"
