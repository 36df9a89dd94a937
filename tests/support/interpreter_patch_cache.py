"""Triton's CPU interpreter, made cheaper for the test suite: no re-patching of triton.language per device call.

The interpreter binds triton.language to itself (`_patch_lang`: `inspect.getmembers` over tl, tl.tensor, tl.math,
tl.core) once per kernel launch, and again at *every call of a @triton.jit helper* from inside a kernel, once per
program and loop iteration. Inside a launch the modules are already bound, so those calls change nothing (a bound
member is no builtin and is skipped; the rest re-sets what is already set, under a scope nobody restores) but cost
about a third of an interpreted engine test (measured: 651k `_patch_builtin` calls, 203 of 587 s, on
tests/check/test_selftest_paths.py under cProfile). `install()` skips a helper's re-patch when every language module
its globals reach is bound by the launch in progress, and patches as before otherwise. The kernels run the same
interpreted code; only the redundant binding goes.
"""

from __future__ import annotations

import inspect


def install() -> bool:
    """Wraps triton.runtime.interpreter._patch_lang (idempotent); False where triton or the hook is missing."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    original = getattr(interpreter, "_patch_lang", None)
    if original is None or getattr(original, "_specbench_cached", False):
        return original is not None
    bound: list[set[int]] = []  # the language modules the launch in progress has bound (a stack: launches nest)

    class _Restoring:
        """The launch's scope: restoring it also ends the launch."""

        def __init__(self, scope) -> None:
            self.scope = scope

        def restore(self) -> None:
            try:
                self.scope.restore()
            finally:
                bound.pop()

    class _Nothing:
        def restore(self) -> None:
            pass

    # per globals dict (held, so its id stays its own): (its size, the names bound to a language module, their ids).
    # Scanning the globals at every helper call was this patch's own cost: 46k scans, 12 of 295 s under cProfile on
    # tests/check/test_selftest_paths.py; a dict that gained or lost a name, or rebound one of those names, is
    # scanned again.
    scanned: dict[int, tuple[dict, int, tuple[tuple[str, object], ...], frozenset[int]]] = {}

    def languages(fn) -> frozenset[int]:
        g = fn.__globals__
        hit = scanned.get(id(g))
        if hit is not None and len(g) == hit[1] and all(g.get(name) is module for name, module in hit[2]):
            return hit[3]
        found = tuple((name, v) for name, v in g.items() if inspect.ismodule(v) and v in (tl, tl.core))
        scanned[id(g)] = (g, len(g), found, frozenset(id(v) for _, v in found))
        return scanned[id(g)][3]

    def patch_lang(fn):
        is_launch = _is_launch_frame(inspect.currentframe().f_back)
        langs = languages(fn)
        if not is_launch and bound and langs <= bound[-1]:
            return _Nothing()  # a helper called inside a launch whose modules are bound already
        scope = original(fn)
        if not is_launch:
            if bound:
                bound[-1] |= langs
            return scope  # as before: the helper's scope is never restored
        bound.append(set(langs))
        return _Restoring(scope)

    patch_lang._specbench_cached = True
    interpreter._patch_lang = patch_lang
    return True


def _is_launch_frame(frame) -> bool:
    """Whether `frame` is a kernel launch (GridExecutor.__call__, whose scope is restored), not a helper call
    (InterpretedFunction.__call__, whose is not): anything but a helper call counts as a launch."""
    owner = None if frame is None else frame.f_locals.get("self")
    return type(owner).__name__ != "InterpretedFunction"
