"""Triton's CPU interpreter, made cheaper for the test suite: a block type, and a tensor's shape, built once per type;
no broadcast work for operands of one shape.

Every op of an interpreted kernel builds a `tl.block_type` for its result (splat, broadcast, expand_dims, and each
operand a binary op broadcasts) and a `tl.tensor` around it, whose shape is a fresh `tl.tuple` of fresh
`constexpr`s: 565k block types and 795k tensors, ~28 of the ~95 s under cProfile of the Triton-interpreter test in
tests/check/test_selftest_paths.py. A kernel builds the same few types over and over, so `install()`:
  - interns `tl.block_type(element_ty, shape)`: one object per (element type object, int dims), so the same element
    type *object* comes back (semantic.py tests dtypes by identity, e.g. `element_ty is tl.float16`); a pointer
    type, a new object at every launch, counts by value (its pointee object, address space, constness: all a
    pointer type holds); a shape that is not a list or `tl.tuple` of ints / int constexprs, and any subclass, is
    built as before (so its errors are too);
  - builds a tensor's `numel` and `shape` (constexprs, which nothing mutates) once per type object and shares them;
  - returns two blocks of one shape from the interpreter's broadcast as they are, as the original does, without its
    tl.tuple comparisons (~9% of tests/eagle/test_eagle_cuda_graphs.py under cProfile), and a value cast to the
    scalar type object it has as it is, as the original does, without comparing the types' names.
The interned objects hold the same attributes the original constructors give; tests/kernels/
test_interpreter_block_types.py runs kernels with and without the patch and compares their outputs bit for bit.
"""

from __future__ import annotations

import builtins

MAX_ENTRIES = 1 << 14  # per-launch pointer types are new objects every launch: bounded, cleared when full
_state = {"on": True}  # off: every construction takes the original path (a test compares outputs both ways)


def install() -> bool:
    """Wraps tl.block_type's construction and tl.tensor.__init__ (idempotent); False where triton is missing."""
    try:
        from triton.language import core
        from triton.runtime import interpreter
    except ImportError:
        return False
    if getattr(core.block_type, "_specbench_interned", False):
        _state["on"] = True
        interned_tables = core.block_type._specbench_tables
        for table in interned_tables:
            table.clear()
        return True
    block_type, constexpr, lang_tuple, tensor = core.block_type, core.constexpr, core.tuple, core.tensor
    dtype, pointer_type = core.dtype, core.pointer_type
    original_block_init, original_tensor_init = block_type.__init__, tensor.__init__
    interned: dict[tuple, object] = {}  # (id(element type), dims) -> its block type (which holds the element type)
    tensor_parts: dict[int, tuple] = {}  # id(type) -> (type, numel, shape) of a tensor of that type

    def key_of(element_ty, shape) -> tuple | None:
        if type(shape) is list:
            values = shape
        elif type(shape) is lang_tuple:
            values = shape.values
        else:
            return None
        dims = []
        for d in values:
            if type(d) is int:
                dims.append(d)
            elif type(d) is constexpr and type(d.value) is int:
                dims.append(d.value)
            else:
                return None
        if type(element_ty) is pointer_type:  # a new object per launch (the kernel's pointer arguments): by value
            if type(element_ty.element_ty) is not dtype:
                return None
            pointee = ("pointer", id(element_ty.element_ty), element_ty.address_space, element_ty.const)
            return pointee, builtins.tuple(dims)
        return id(element_ty), builtins.tuple(dims)

    def block_new(cls, element_ty=None, shape=None, *args, **kwargs):
        if cls is block_type and _state["on"]:
            key = key_of(element_ty, shape)
            if key is not None:
                hit = interned.get(key)
                if hit is not None:
                    return hit
        return object.__new__(cls)

    def block_init(self, element_ty, shape, *args, **kwargs):
        # an interned one, built already (Python calls __init__ on whatever __new__ gave)
        if "name" in self.__dict__ and _state["on"]:
            return
        original_block_init(self, element_ty, shape, *args, **kwargs)
        if type(self) is block_type and _state["on"]:
            key = key_of(element_ty, shape)
            if key is not None:
                if len(interned) >= MAX_ENTRIES:
                    interned.clear()
                interned[key] = self

    def tensor_init(self, handle, type):
        parts = tensor_parts.get(id(type)) if _state["on"] else None
        if parts is None or parts[0] is not type:
            original_tensor_init(self, handle, type)
            if _state["on"]:
                if len(tensor_parts) >= MAX_ENTRIES:
                    tensor_parts.clear()
                tensor_parts[id(type)] = (type, self.numel, self.shape)  # holding the type keeps its id its own
            return
        # the original's attributes, in its order
        self.handle = handle
        self.shape = parts[2]
        self.numel = parts[1]
        self.type = type
        self.dtype = type.scalar

    semantic = interpreter.interpreter_semantic
    original_broadcast = semantic.broadcast_impl_value  # bound to the interpreter's TritonSemantic

    def broadcast_impl_value(lhs, rhs):
        """Two blocks of one shape: the original returns them as they are (every dim matches, nothing to broadcast),
        after comparing tl.tuples through fresh tl.tuples and constexprs. Anything else: the original."""
        lhs_ty, rhs_ty = lhs.type, rhs.type
        if (_state["on"] and type(lhs_ty) is block_type and type(rhs_ty) is block_type
                and lhs_ty.shape.values == rhs_ty.shape.values):
            return lhs, rhs
        return original_broadcast(lhs, rhs)

    original_cast = semantic.cast

    def cast(input, dst_ty, fp_downcast_rounding=None):
        """A cast to the very scalar type the input has: the original returns the input first thing (its scalar types
        compare equal), before it reads anything else; anything else: the original."""
        if _state["on"] and isinstance(dst_ty, dtype) and input.type.scalar is dst_ty.scalar:
            return input
        return original_cast(input, dst_ty, fp_downcast_rounding)

    # this instance only: the compiler's semantics untouched
    semantic.broadcast_impl_value = broadcast_impl_value
    semantic.cast = cast
    block_type.__new__ = block_new
    block_type.__init__ = block_init
    tensor.__init__ = tensor_init
    block_type._specbench_interned = True
    block_type._specbench_originals = (original_block_init, original_tensor_init)
    block_type._specbench_tables = (interned, tensor_parts)
    return True


def uninstall() -> None:
    """Every construction back on the original path, nothing remembered (a test compares kernel outputs with and
    without the patch; `install()` turns it on again, starting empty)."""
    from triton.language import core

    _state["on"] = False
    for table in getattr(core.block_type, "_specbench_tables", ()):
        table.clear()
