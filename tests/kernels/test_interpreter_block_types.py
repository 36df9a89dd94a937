"""tests/support/interpreter_block_types.py: under the CPU interpreter a block type is built once per (element type,
shape) and a tensor's shape once per type, with the attributes the original constructors give, the original's errors,
and kernels' outputs bit for bit the same with and without it."""

from __future__ import annotations

import os

import pytest
import torch
import triton.language as tl

from tests.support import interpreter_block_types
from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here, random_paged_batch

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the CPU interpreter only")


def test_block_types_are_interned_with_the_original_attributes():
    assert getattr(tl.block_type, "_specbench_interned", False)  # conftest installed it
    original_init, _ = tl.block_type._specbench_originals
    for element_ty, shape in ((tl.float32, [4]), (tl.float16, [2, tl.constexpr(8)]), (tl.pointer_type(tl.int32), [16]),
                              (tl.bfloat16, tl.core.tuple([1, 32]))):
        first, again = tl.block_type(element_ty, shape), tl.block_type(element_ty, list(shape))
        assert again is first and first.element_ty == element_ty
        # identity kept (semantic.py tests `is tl.float16`); a pointer type's pointee's
        if element_ty.is_ptr():
            assert first.element_ty.element_ty is element_ty.element_ty
        else:
            assert first.element_ty is element_ty
        built = object.__new__(tl.block_type)
        original_init(built, element_ty, shape)
        assert vars(first).keys() == vars(built).keys()
        assert all(getattr(first, k) == getattr(built, k) for k in vars(built)) and first == built
    assert tl.block_type(tl.float32, [4]) is not tl.block_type(tl.float16, [4])
    # pointer types are new objects at every launch: one block per pointee, address space and constness
    ptr_block = tl.block_type(tl.pointer_type(tl.float16), [8])
    assert tl.block_type(tl.pointer_type(tl.float16), [8]) is ptr_block
    assert ptr_block.element_ty.element_ty is tl.float16
    assert tl.block_type(tl.pointer_type(tl.float16, const=True), [8]) is not ptr_block
    assert tl.block_type(tl.pointer_type(tl.float16, "shared"), [8]) is not ptr_block
    assert tl.block_type(tl.pointer_type(tl.float32), [8]) is not ptr_block
    assert tl.block_type(tl.float32, [4]) is not tl.block_type(tl.float32, [2, 2])
    with pytest.raises(AssertionError):  # a builtin tuple: the original's assert, uncached
        tl.block_type(tl.float32, (4,))
    with pytest.raises(ValueError, match="power of 2"):
        tl.block_type(tl.float32, [3])
    with pytest.raises(TypeError, match="0d block_type"):
        tl.block_type(tl.float32, [])


def test_tensors_of_one_type_get_the_original_shape_and_numel():
    ty = tl.block_type(tl.float32, [2, 8])
    a, b = tl.tensor(None, ty), tl.tensor(None, ty)
    _, original_init = tl.block_type._specbench_originals
    built = object.__new__(tl.tensor)
    original_init(built, None, ty)
    for t in (a, b):
        assert list(vars(t)) == list(vars(built))
        assert [s.value for s in t.shape] == [s.value for s in built.shape] == [2, 8]
        assert t.numel.value == built.numel.value == 16 and t.dtype is tl.float32 and t.type is ty
    scalar = tl.tensor(None, tl.int32)
    assert tuple(scalar.shape) == () and scalar.numel.value == 1 and scalar.dtype is tl.int32


def _kernel_outputs() -> list[torch.Tensor]:
    """Paged attention (fp32 split-KV decode, bf16 verify) and the chain verifier, sampled: their outputs."""
    from specbench.kernels.paged_attention import paged_attention
    from specbench.sampling_params import SamplingParams
    from specbench.speculation.sampling import build_sampling_tensors, make_generator
    from specbench.speculation.verify.chain_triton import verify_triton

    outs = []
    for num_query, num_context, dtype, launch in (([1, 1], [40, 9], torch.float32, {"num_splits": 3, "block_n": 16}),
                                                  ([4, 3], [29, 0], torch.bfloat16, {"num_splits": 2})):
        batch = random_paged_batch(num_query=num_query, num_context=num_context, num_heads=4, num_kv_heads=2,
                                   head_dim=16, block_size=8, dtype=dtype, device="cpu", seed=len(num_context))
        md = batch.md
        outs.append(paged_attention(batch.q, batch.k_cache, batch.v_cache, md.query_start_loc, md.seq_lens,
                                    md.block_tables, max_query_len=md.max_query_len, max_seq_len=md.max_seq_len,
                                    **launch))
    gen = torch.Generator().manual_seed(3)
    vocab, num_draft = 96, torch.tensor([3, 0, 2])
    logits = torch.randn(int((num_draft + 1).sum()), vocab, generator=gen) * 3
    drafts = torch.randint(0, vocab, (3, 3), generator=gen)
    draft_probs = torch.softmax(torch.randn(3, 3, vocab, generator=gen), dim=-1)
    params = [SamplingParams(temperature=0.8, top_k=20, top_p=0.9, seed=s) for s in (1, 2, 3)]
    tensors = build_sampling_tensors(params, [make_generator(s, "cpu") for s in (1, 2, 3)], vocab, "cpu")
    torch.manual_seed(0)
    result = verify_triton(logits, drafts, num_draft, draft_probs, tensors)
    return outs + [result.output_token_ids, result.num_accepted]


def test_kernels_give_the_same_bits_with_and_without_it():
    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    with_patch = _kernel_outputs()
    interpreter_block_types.uninstall()
    try:
        first, again = tl.block_type(tl.float32, [4]), tl.block_type(tl.float32, [4])
        assert first is not again and first == again  # the original path: a new object each time
        without = _kernel_outputs()
    finally:
        assert interpreter_block_types.install()
    assert len(with_patch) == len(without) == 4
    for got, expected in zip(with_patch, without):
        assert got.dtype == expected.dtype and torch.equal(got, expected)


def test_operands_of_one_shape_come_back_as_they_are_and_others_are_broadcast():
    import numpy as np
    from triton.runtime.interpreter import TensorHandle, interpreter_semantic

    def block(shape, dtype=tl.float32):
        data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        return tl.tensor(TensorHandle(data, dtype), tl.block_type(dtype, list(shape)))

    a, b = block((4, 8)), block((4, 8))
    assert interpreter_semantic.broadcast_impl_value(a, b) == (a, b)
    for lhs, rhs in ((block((1, 8)), block((4, 8))), (block((4, 1)), block((4, 8))), (block((8,)), block((4, 8)))):
        got = interpreter_semantic.broadcast_impl_value(lhs, rhs)
        interpreter_block_types.uninstall()
        try:
            expected = interpreter_semantic.broadcast_impl_value(lhs, rhs)
        finally:
            assert interpreter_block_types.install()
        for g, e in zip(got, expected):
            assert g.type == e.type and [s.value for s in g.shape] == [4, 8]
            assert np.array_equal(g.handle.data, e.handle.data) and g.handle.data.shape == (4, 8)
    with pytest.raises(ValueError, match="Cannot make_shape_compatible"):
        interpreter_semantic.broadcast_impl_value(block((2, 8)), block((4, 8)))


def test_a_cast_to_the_type_a_value_has_returns_it_and_others_cast():
    import numpy as np
    from triton.runtime.interpreter import TensorHandle, interpreter_semantic

    data = np.linspace(-2, 2, 8, dtype=np.float32)
    x = tl.tensor(TensorHandle(data, tl.float32), tl.block_type(tl.float32, [8]))
    assert interpreter_semantic.cast(x, tl.float32) is x
    assert interpreter_semantic.cast(x, tl.block_type(tl.float32, [8]), "rtz") is x  # as the original: first thing
    for dst in (tl.float16, tl.int32, tl.bfloat16):
        got = interpreter_semantic.cast(x, dst)
        interpreter_block_types.uninstall()
        try:
            expected = interpreter_semantic.cast(x, dst)
            assert interpreter_semantic.cast(x, tl.float32) is x  # the original's own early return
        finally:
            assert interpreter_block_types.install()
        assert got is not x and got.type == expected.type and got.dtype is dst
        assert got.handle.data.dtype == expected.handle.data.dtype
        assert np.array_equal(got.handle.data.view(np.uint8), expected.handle.data.view(np.uint8))
