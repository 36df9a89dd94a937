"""Triton's CPU interpreter, made cheaper for the test suite: the numpy dtype of a Triton dtype looked up, not rebuilt.

`triton.runtime.interpreter._get_np_dtype` builds its 19-entry {Triton dtype: numpy dtype} table at every call (each
key's hash a Python call), and the interpreter calls it for every constant, cast, load, store and splat of every
program: ~8% of an interpreted engine test (measured: 306k calls, 9.3 of 112 s, under cProfile, on
tests/faults/test_path_mutants.py::test_ahead_positions_stale_costs_acceptance_of_rounds_drafted_ahead). `install()`
remembers each answer of the original function per scalar dtype (a block type's answer is its element type's there
too, and a pointer's is uint64), so the kernels run the same interpreted code with the same numpy dtypes.
"""

from __future__ import annotations

import numpy as np


def install() -> bool:
    """Wraps triton.runtime.interpreter._get_np_dtype (idempotent); False where triton or the function is missing."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_get_np_dtype", None)
    if original is None or getattr(original, "_specbench_cached", False):
        return original is not None
    pointer = np.dtype(np.uint64)  # the original's answer for a pointer, or a block of pointers
    answers: dict = {}  # scalar Triton dtype -> the original's numpy dtype for it

    def get_np_dtype(tt_dtype):
        scalar = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        if isinstance(scalar, tl.pointer_type):
            return pointer
        try:
            return answers[scalar]
        except KeyError:
            answers[scalar] = answer = original(scalar)  # raises as the original does for an unknown dtype
            return answer

    get_np_dtype._specbench_cached = True
    get_np_dtype._specbench_original = original
    interpreter._get_np_dtype = get_np_dtype
    return True
