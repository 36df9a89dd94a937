"""Kernel micro-benchmark (CUDA): each Triton kernel vs its torch reference at Llama-3.1-8B shapes.

Usage (repo root): source scripts/gpu_env.sh && python scripts/bench_kernels.py [--quick] [--json PATH]. Columns are
explained in `HEADER`. It reuses the kernel tests' random paged batches (tests.support, on PYTHONPATH via gpu_env.sh).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

from specbench.attention.torch_ref import TorchPagedAttention
from specbench.kernels.activation import silu_and_mul
from specbench.kernels.kv_store import store_kv
from specbench.kernels.paged_attention import paged_attention, plan_launch
from specbench.kernels.rms_norm import rms_norm
from specbench.kernels.rope import apply_rope_
from specbench.kernels.runtime import sm_count
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.models.config import RopeScaling
from specbench.models.layers import RMSNorm, RotaryEmbedding
from specbench.sampling_params import SamplingParams
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.verify.chain import verify
from specbench.speculation.verify.chain_triton import verify_triton
from tests.support.kernel_testing import random_paged_batch

NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, BLOCK_SIZE, HIDDEN, VOCAB, NUM_LAYERS = 32, 8, 128, 16, 4096, 128256, 32
INTER = 14336
DTYPE = torch.bfloat16


# Times are triton.testing.do_bench medians, L2 flushed before each call. "GPU us" replays a CUDA graph of the
# call (device time, as under the engine's graphs); "eager us" is the plain Python call, which at small shapes
# measures host launch overhead. GB/s = bytes the kernel must move / its GPU time; %copy compares that with the
# device-to-device copy bandwidth measured in the same run.
HEADER = (f"{'kernel':<14} {'shape':<22} {'GPU us: triton':>14} {'torch':>8} {'speedup':>8} {'GB/s':>6} {'%copy':>6}"
          f" {'eager us: triton':>16} {'torch':>8} {'speedup':>8}")


@dataclass
class Row:
    kernel: str
    shape: str
    bytes_moved: int  # what the kernel must read + write at least
    triton_gpu_us: float  # CUDA-graph replay: device time
    torch_gpu_us: float  # nan where the reference cannot be captured (it syncs the host)
    triton_eager_us: float  # plain call: host launch overhead included
    torch_eager_us: float
    note: str = ""

    def line(self, copy_gbps: float) -> str:
        gbps = self.bytes_moved / self.triton_gpu_us / 1e3
        return (f"{self.kernel:<14} {self.shape:<22} {self.triton_gpu_us:>14.1f} {self.torch_gpu_us:>8.1f} "
                f"{self.torch_gpu_us / self.triton_gpu_us:>7.2f}x {gbps:>6.0f} {100 * gbps / copy_gbps:>5.1f}% "
                f"{self.triton_eager_us:>16.1f} {self.torch_eager_us:>8.1f} "
                f"{self.torch_eager_us / self.triton_eager_us:>7.2f}x  {self.note}")


def bench_us(fn) -> float:
    return 1e3 * do_bench(fn, warmup=10, rep=50, return_mode="median")


def graph_us(fn) -> float:
    """Device time of `fn`: do_bench over replays of a CUDA graph of one call (nan if it cannot be captured)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # compile and warm the allocator off the capture
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError as e:
        print(f"  (not capturable: {e})")
        return float("nan")
    return bench_us(graph.replay)


def compare(kernel: str, shape: str, bytes_moved: int, triton_fn, torch_fn, note: str = "",
            is_torch_capturable: bool = True) -> Row:
    """A failed capture can leave the CUDA context unusable: only capture what is known not to sync."""
    torch_gpu_us = graph_us(torch_fn) if is_torch_capturable else float("nan")
    return Row(kernel, shape, bytes_moved, graph_us(triton_fn), torch_gpu_us, bench_us(triton_fn),
               bench_us(torch_fn), note)


def copy_bandwidth_gbps() -> float:
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / bench_us(lambda: dst.copy_(src)) / 1e3  # read + write


def bench_attention(num_reqs: int, context: int, num_query: int) -> Row:
    batch = random_paged_batch(num_query=[num_query] * num_reqs, num_context=[context - num_query] * num_reqs,
                               num_heads=NUM_HEADS, num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM,
                               block_size=BLOCK_SIZE, dtype=DTYPE, device="cuda")
    md = batch.md
    cache = KVCache(KVCacheSpec(1, NUM_KV_HEADS, HEAD_DIM, DTYPE), 0, BLOCK_SIZE, torch.device("cuda"))
    cache.k[0], cache.v[0] = batch.k_cache, batch.v_cache
    reference = TorchPagedAttention()

    def triton_fn():
        paged_attention(batch.q, batch.k_cache, batch.v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                        max_query_len=md.max_query_len, max_seq_len=md.max_seq_len)

    kv_bytes = 2 * num_reqs * context * NUM_KV_HEADS * HEAD_DIM * DTYPE.itemsize
    qo_bytes = 2 * batch.q.numel() * DTYPE.itemsize
    plan = plan_launch(num_reqs=num_reqs, num_kv_heads=NUM_KV_HEADS, group=NUM_HEADS // NUM_KV_HEADS,
                       head_dim=HEAD_DIM, dtype=DTYPE, max_query_len=num_query, max_seq_len=context,
                       num_sms=sm_count(torch.device("cuda")))
    kind = "decode" if num_query == 1 else f"verify{num_query}"
    return compare(f"attn_{kind}", f"bs={num_reqs} ctx={context}", kv_bytes + qo_bytes, triton_fn,
                   lambda: reference.forward(0, batch.q, batch.k, batch.v, cache, md),
                   f"splits={plan.num_splits}; torch: + its KV write, boolean-mask indexing syncs",
                   is_torch_capturable=False)


def bench_prefill(num_reqs: int, num_tokens: int) -> Row:
    batch = random_paged_batch(num_query=[num_tokens] * num_reqs, num_context=[0] * num_reqs, num_heads=NUM_HEADS,
                               num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM, block_size=BLOCK_SIZE, dtype=DTYPE,
                               device="cuda")
    md = batch.md
    cache = KVCache(KVCacheSpec(1, NUM_KV_HEADS, HEAD_DIM, DTYPE), 0, BLOCK_SIZE, torch.device("cuda"))
    cache.k[0], cache.v[0] = batch.k_cache, batch.v_cache
    reference = TorchPagedAttention()

    def triton_fn():
        paged_attention(batch.q, batch.k_cache, batch.v_cache, md.query_start_loc, md.seq_lens, md.block_tables,
                        max_query_len=md.max_query_len, max_seq_len=md.max_seq_len)

    row = compare("attn_prefill", f"bs={num_reqs} tokens={num_tokens}",
                  (2 * batch.q.numel() + 2 * batch.k.numel()) * DTYPE.itemsize, triton_fn,
                  lambda: reference.forward(0, batch.q, batch.k, batch.v, cache, md), is_torch_capturable=False)
    flops = 4 * NUM_HEADS * HEAD_DIM * num_reqs * num_tokens * (num_tokens + 1) / 2  # causal QK^T and PV
    row.note = f"compute-bound: {flops / row.triton_gpu_us / 1e6:.0f} TFLOP/s"
    return row


def bench_store(num_tokens: int) -> Row:
    k = torch.randn(num_tokens, NUM_KV_HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)
    v = torch.randn_like(k)
    k_cache = torch.randn(num_tokens // BLOCK_SIZE + 8, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM, device="cuda",
                          dtype=DTYPE)
    v_cache = torch.randn_like(k_cache)
    slots = torch.randperm(k_cache.shape[0] * BLOCK_SIZE, device="cuda")[:num_tokens]
    k_flat, v_flat = k_cache.view(-1, NUM_KV_HEADS, HEAD_DIM), v_cache.view(-1, NUM_KV_HEADS, HEAD_DIM)

    def torch_fn():
        k_flat.index_copy_(0, slots, k)
        v_flat.index_copy_(0, slots, v)

    return compare("kv_store", f"tokens={num_tokens}", 4 * k.numel() * DTYPE.itemsize,
                   lambda: store_kv(k, v, k_cache, v_cache, slots), torch_fn)


def bench_verify(num_reqs: int, num_draft: int, greedy: bool) -> Row:
    logits = torch.randn(num_reqs * (num_draft + 1), VOCAB, device="cuda")
    drafts = torch.randint(0, VOCAB, (num_reqs, num_draft), device="cuda")
    counts = torch.full((num_reqs,), num_draft, dtype=torch.int64, device="cuda")  # no seeded rows: no host read
    draft_probs = None if greedy else torch.softmax(torch.randn(num_reqs, num_draft, VOCAB, device="cuda"), -1)
    params = [SamplingParams(temperature=0.0 if greedy else 0.8)] * num_reqs
    st = build_sampling_tensors(params, [None] * num_reqs, VOCAB, "cuda")
    moved = logits.numel() * 4 + (0 if greedy else draft_probs.numel() * 4 + 2 * num_reqs * VOCAB * 4)
    return compare("verify_" + ("greedy" if greedy else "sampled"), f"bs={num_reqs} k={num_draft}", moved,
                   lambda: verify_triton(logits, drafts, counts, draft_probs, st),
                   lambda: verify(logits, drafts, counts, draft_probs, st),
                   f"V={VOCAB}" + ("" if greedy else "; both warp logits with the torch sort"),
                   is_torch_capturable=False)


def bench_rms_norm(num_rows: int) -> Row:
    norm = RMSNorm(HIDDEN, 1e-5).to(device="cuda", dtype=DTYPE)
    x = torch.randn(num_rows, HIDDEN, device="cuda", dtype=DTYPE)
    residual = torch.randn_like(x)
    return compare("add_rms_norm", f"rows={num_rows} hidden={HIDDEN}", 4 * x.numel() * DTYPE.itemsize,
                   lambda: rms_norm(x, norm.weight, norm.eps, residual), lambda: norm(residual + x))


def bench_rope(num_tokens: int) -> Row:
    rotary = RotaryEmbedding(HEAD_DIM, 500000.0, RopeScaling("llama3", 8.0, 1.0, 4.0, 8192))
    positions = torch.randint(0, 4096, (num_tokens,), device="cuda")
    cos_sin = rotary.cos_sin(positions, 4096)
    q = torch.randn(num_tokens, NUM_HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)
    k = torch.randn(num_tokens, NUM_KV_HEADS, HEAD_DIM, device="cuda", dtype=DTYPE)

    def torch_fn():
        RotaryEmbedding.apply(q, cos_sin)
        RotaryEmbedding.apply(k, cos_sin)

    return compare("rope_qk", f"tokens={num_tokens}", 2 * (q.numel() + k.numel()) * DTYPE.itemsize,
                   lambda: apply_rope_(q, k, positions, rotary._cos_sin), torch_fn)


def bench_silu_and_mul(num_tokens: int) -> Row:
    gate_up = torch.randn(num_tokens, 2 * INTER, device="cuda", dtype=DTYPE)
    gate, up = gate_up.split(INTER, dim=-1)
    return compare("silu_and_mul", f"tokens={num_tokens}", 3 * num_tokens * INTER * DTYPE.itemsize,
                   lambda: silu_and_mul(gate_up), lambda: F.silu(gate) * up)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    torch.manual_seed(0)
    copy_gbps = copy_bandwidth_gbps()
    tiny = torch.zeros(1, device="cuda")
    floor_us = graph_us(lambda: tiny.add_(1))
    print(f"device: {torch.cuda.get_device_name()}, copy bandwidth {copy_gbps:.0f} GB/s, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print(f"GPU-time floor (graph replay of one 1-element kernel): {floor_us:.1f} us, included in every GPU time "
          f"below; kernels replayed back to back in one step graph do not each pay all of it")
    contexts = [128, 1024, 4096] if args.quick else [128, 512, 1024, 2048, 4096]
    rows = [bench_attention(b, c, q) for q in (1, 4) for b in (1, 16, 64) for c in contexts]
    rows += [bench_prefill(b, n) for b, n in ((1, 2048), (8, 512))]
    rows += [bench_store(n) for n in (1, 64, 4096)]
    rows += [bench_verify(b, 4, greedy) for greedy in (True, False) for b in (1, 16, 64)]
    rows += [bench_rms_norm(n) for n in (1, 64, 4096)]
    rows += [bench_rope(n) for n in (1, 64, 4096)]
    rows += [bench_silu_and_mul(n) for n in (1, 64, 4096)]
    print(HEADER)
    for row in rows:
        print(row.line(copy_gbps))
    by_name = {(r.kernel, r.shape): r for r in rows}
    print(f"\nattention share of an 8B decode step at bs=1 ({NUM_LAYERS} layers) vs the weight-read floor "
          f"({16.06e9 / copy_gbps / 1e6:.2f} ms at 16.06 GB):")
    for c in contexts:
        for kind in ("decode", "verify4"):
            row = by_name[(f"attn_{kind}", f"bs=1 ctx={c}")]
            print(f"  {kind:<8} ctx={c:<5} {NUM_LAYERS * row.triton_gpu_us / 1e3:.3f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_gbps": copy_gbps, "graph_floor_us": floor_us,
                       "rows": [asdict(r) for r in rows]}, f, indent=1)


if __name__ == "__main__":
    main()
