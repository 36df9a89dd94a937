"""Triton's CPU interpreter, made cheaper for the test suite: no integer-overflow check whose verdict is dropped.

Every int add, sub and mul of a kernel (`x + 1`, offsets, strides) calls the semantic layer's
`binary_op_sanitize_overflow_impl`: it redoes the operation in int64 (two casts, the op, two bound constants, two
comparisons, an `and`) and hands the condition to `device_assert`, which returns at once unless the builder's
options have `debug` on. The interpreter's builder has `InterpreterOptions()`, whose `debug` is False and which
nothing sets: the condition is computed and dropped, at every int op of every program (~30k calls, 13 of 50 s under
cProfile, on tests/eagle/test_eagle_cuda_graphs.py::test_rounds_drafted_ahead_match_eager). The int64 redo cannot
overflow (int32 operands: |a * b| < 2**62) nor raise, so it has no effect. `install()` skips it where
`device_assert` would drop its verdict and calls the original otherwise (the operand checks it asserts first are
kept), on the interpreter's own semantic object only: compiled kernels are untouched.
"""

from __future__ import annotations


def install() -> bool:
    """Wraps the interpreter's binary_op_sanitize_overflow_impl (idempotent); False where triton or it is missing."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    semantic = getattr(interpreter, "interpreter_semantic", None)
    original = getattr(semantic, "binary_op_sanitize_overflow_impl", None)
    if original is None or getattr(original, "_specbench_skipping", False):
        return original is not None

    def sanitize_overflow(lhs, rhs, binary_op):
        options = semantic.builder.options
        if options.debug or lhs.type.scalar.int_bitwidth >= 64 or not options.sanitize_overflow:
            return original(lhs, rhs, binary_op)  # a check that runs (debug), or the original's own early return
        # the original's operand checks, then its verdict, which device_assert drops without debug
        assert lhs.type.scalar == rhs.type.scalar, f"expected matching operand types, got {lhs.type.scalar} and " \
                                                   f"{rhs.type.scalar}"
        assert lhs.type.scalar.is_int(), f"expected integer type, got {lhs.type.scalar}"

    sanitize_overflow._specbench_skipping = True
    sanitize_overflow._specbench_original = original
    semantic.binary_op_sanitize_overflow_impl = sanitize_overflow
    return True
