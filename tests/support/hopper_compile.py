"""Compile Triton kernels for an H100 (sm90) on a machine without a GPU: the ptxas shipped in the triton wheel turns
each kernel into a cubin, so the compiled frontend's rules (an `if` may not change a variable's type, pointer
unification, constexpr use) are checked where CI runs; the CPU interpreter does not check them.

The test process runs Triton interpreted (tests/conftest.py sets TRITON_INTERPRET, read once at triton's import), so
the cases compile in a child process without it: `python -m tests.support.hopper_compile CASE...` prints one line
per case, "ok CASE" or "failed CASE: error".
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

_RUNTIME_TYPES = ("i1", "i32", "i64", "fp32")


def compile_for_hopper(kernel, args: dict, num_warps: int = 4):
    """`args`: every parameter of the kernel by name: a pointer or scalar type string ("*bf16", "i32", "fp32") for a
    runtime argument, else the constexpr's value. Raises what triton.compile raises."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs = {}, {}
    for name in inspect.signature(kernel.fn).parameters:
        value = args[name]
        if isinstance(value, str) and (value.startswith("*") or value in _RUNTIME_TYPES):
            signature[name] = value
        else:
            signature[name] = "constexpr"
            constexprs[(kernel.arg_names.index(name),)] = value
    source = ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps})


def run_cases(case_names: list[str], timeout: float = 600) -> dict[str, str]:
    """Each case (tests/support/hopper_cases.py CASES) compiled in a child process without the interpreter:
    name -> "ok" or the error."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-m", "tests.support.hopper_compile", *case_names], env=env,
                         capture_output=True, text=True, timeout=timeout, check=False)
    results = {}
    for line in out.stdout.splitlines():
        status, _, rest = line.partition(" ")
        name, _, error = rest.partition(": ")
        results[name] = "ok" if status == "ok" else error
    for name in case_names:
        results.setdefault(name, f"no result (exit {out.returncode}): {out.stderr[-2000:]}")
    return results


def main(case_names: list[str]) -> None:
    from tests.support.hopper_cases import CASES

    for name in case_names:
        kernel, args, num_warps = CASES[name]()
        try:
            compile_for_hopper(kernel, args, num_warps)
            print(f"ok {name}", flush=True)
        except Exception as error:  # noqa: BLE001 - reported to the test, which asserts on it
            print(f"failed {name}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
