"""The kernel variants tests/kernels/test_kernels_compile_for_hopper.py compiles for sm90: name -> () -> (kernel,
args by parameter name, num_warps) (tests/support/hopper_compile.py). Imported in the child process only."""

from __future__ import annotations

ROUTER = dict(
    x_ptr="*bf16", weight_ptr="*bf16", bias_ptr="*bf16", partial_ptr="*fp32", counter_ptr="*i32",
    correction_bias_ptr="*fp32", is_real_ptr="*i1", ids_ptr="*i64", weights_ptr="*fp32", sorted_slots_ptr="*i32",
    cu_ptr="*i32", active_ptr="*i32", num_active_ptr="*i32", num_tokens="i32", stride_x="i32",
    routed_scaling_factor="fp32", NUM_EXPERTS=128, HIDDEN=2048, HAS_BIAS=False, DOT_PRECISION="tf32",
    IS_DOT_UPCAST=False, TOP_K=8, SCORING=0, NORM_TOPK=True, HAS_CORRECTION_BIAS=False, HAS_IS_REAL=True,
    PRECISE_EXP=True, NUM_SPLITS=8, BLOCK_H=256, BLOCK_EP=16, BLOCK_TP=16, BLOCK_T=4, BLOCK_E=128, BLOCK_K=8,
    USE_PDL=True, norm_weight_ptr="*bf16", residual_ptr="*bf16", normed_ptr="*bf16", stream_ptr="*bf16", eps="fp32",
    HAS_NORM=True, HAS_RESIDUAL=True, IS_OFFSET=True)
QK = dict(
    qkv_ptr="*bf16", q_norm_ptr="*bf16", k_norm_ptr="*bf16", cos_sin_ptr="*fp32", slot_mapping_ptr="*i64",
    out_ptr="*bf16", k_cache_ptr="*bf16", v_cache_ptr="*bf16", eps="fp32", stride_qkv="i32", stride_out="i32",
    stride_cs_token="i32", stride_cs_kind="i32", stride_kc_slot="i64", stride_kc_head="i32", stride_vc_slot="i64",
    stride_vc_head="i32", NUM_Q_HEADS=16, NUM_KV_HEADS=2, HEAD_DIM=256, Q_HEAD_STRIDE=512, ROTARY_DIM=64,
    IS_OFFSET=True, BLOCK_HALF=32, BLOCK_PASS=256, USE_PDL=True)
GEMV = dict(
    x_ptr="*bf16", weight_ptr="*bf16", norm_weight_ptr="*bf16", residual_ptr="*bf16", bias_ptr="*bf16",
    out_ptr="*bf16", cos_sin_ptr="*bf16", slot_mapping_ptr="*bf16", k_cache_ptr="*bf16", v_cache_ptr="*bf16",
    gate_ptr="*bf16", num_tokens="i32", out_features="i32", eps="fp32", stride_x="i32", stride_residual="i32",
    stride_out="i32", stride_gate="i32", stride_cs_token="i32", stride_cs_kind="i32", stride_kc_slot="i32",
    stride_kc_head="i32", stride_vc_slot="i32", stride_vc_head="i32", IN_SIZE=4096, HAS_NORM=False, IS_GATED=False,
    HAS_RESIDUAL=False, HAS_BIAS=False, PRECISE_EXP=True, IS_DOT=False, DOT_PRECISION="tf32", IS_DOT_UPCAST=False,
    BLOCK_M=1, BLOCK_N=2, BLOCK_K=2048, RMS_BLOCK=4096, NORM_SPLIT=0, FLATTEN=False, HAS_ROPE=False, NUM_Q_HEADS=0,
    NUM_KV_HEADS=0, HEAD_DIM=2, HAS_INPUT_GATE=True, GATE_GROUP=256, GATE_GROUP_STRIDE=512, USE_PDL=True)


def _router(**overrides):
    from specbench.kernels.moe_route import _router_route_sort_kernel

    return _router_route_sort_kernel, dict(ROUTER, **overrides), 1


def _qk(**overrides):
    from specbench.kernels.qk_norm_rope import _qk_norm_rope_store_kernel

    return _qk_norm_rope_store_kernel, dict(QK, **overrides), 1


def _gemv(num_warps: int, **overrides):
    from specbench.kernels.gemv import _gemv_kernel

    return _gemv_kernel, dict(GEMV, **overrides), num_warps


def _retyped():
    # The guard: a compiled Triton `if` may not change a variable's type (the interpreter allows it).
    import triton
    import triton.language as tl

    @triton.jit
    def retyped(x_ptr, FLAG: tl.constexpr):
        x = tl.load(x_ptr)
        if tl.program_id(0) == 0:
            x = x.to(tl.float32)
        tl.store(x_ptr, x.to(tl.float16))

    return retyped, dict(x_ptr="*fp16", FLAG=True), 1


CASES = {
    "router-norm": lambda: _router(HAS_RESIDUAL=False, IS_OFFSET=False, BLOCK_T=1),
    "router-add-offset-norm": lambda: _router(),
    "qk-gated-offset-partial": lambda: _qk(),
    "qk-qwen3": lambda: _qk(Q_HEAD_STRIDE=128, HEAD_DIM=128, ROTARY_DIM=128, IS_OFFSET=False, BLOCK_HALF=64,
                            BLOCK_PASS=1),
    "gemv-gate-cuda-cores": lambda: _gemv(8),
    "gemv-gate-tensor-cores": lambda: _gemv(4, IS_DOT=True, BLOCK_M=16, BLOCK_N=32, BLOCK_K=512),
    "guard-retyped-if": _retyped,
}
