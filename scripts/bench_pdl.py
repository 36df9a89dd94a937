"""Does programmatic dependent launch (Triton launch_pdl + gdc_wait) shorten a CUDA-graph chain of small
dependent kernels on this GPU? Chain of gemv kernels (each reads the previous one's output) and tiny 1-program
kernels, captured in a graph, replayed; with and without PDL, and with the weight tile loaded before the wait."""
import sys
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def gemv(x, w, y, K: tl.constexpr, BLOCK_N: tl.constexpr, MODE: tl.constexpr):
    # MODE 0: no PDL; 1: wait at the top; 2: first weight tile loaded before the wait, launch dependents early
    pid = tl.program_id(0)
    rows = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, K)
    if MODE == 2:
        wt = tl.load(w + rows[:, None] * K + cols[None, :])
        gdc_wait()
        gdc_launch_dependents()
    else:
        if MODE == 1:
            gdc_wait()
            gdc_launch_dependents()
        wt = tl.load(w + rows[:, None] * K + cols[None, :])
    xv = tl.load(x + cols).to(tl.float32)
    acc = tl.sum(wt.to(tl.float32) * xv[None, :], axis=1)
    tl.store(y + rows, acc.to(y.dtype.element_ty))


@triton.jit
def tiny(x, y, N: tl.constexpr, MODE: tl.constexpr):
    if MODE != 0:
        gdc_wait()
        gdc_launch_dependents()
    offs = tl.arange(0, N)
    v = tl.load(x + offs).to(tl.float32)
    v = v * tl.rsqrt(tl.sum(v * v) / N + 1e-6)
    tl.store(y + offs, v.to(y.dtype.element_ty))


def run(mode: int, num_layers: int, K: int, tiny_per_layer: int) -> float:
    dev = "cuda"
    ws = [torch.randn(K, K, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(num_layers)]
    bufs = [torch.randn(K, device=dev, dtype=torch.bfloat16) for _ in range(2)]
    pdl = mode != 0

    def step():
        a, b = bufs
        for w in ws:
            gemv[(K // 4,)](a, w, b, K, 4, mode, num_warps=4, launch_pdl=pdl)
            for _ in range(tiny_per_layer):
                tiny[(1,)](b, a, K, mode, num_warps=4, launch_pdl=pdl)
                tiny[(1,)](a, b, K, mode, num_warps=4, launch_pdl=pdl)
            a, b = b, a

    step(); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        step()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            step()
    torch.cuda.synchronize()
    for _ in range(20):
        g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(50):
            g.replay()
        end.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 50 * 1000)
    return min(times)


def check(mode: int) -> None:
    K = 2048
    w = torch.randn(K, K, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(K, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(K, device="cuda", dtype=torch.bfloat16)
    gemv[(K // 4,)](x, w, y, K, 4, mode, num_warps=4, launch_pdl=mode != 0)
    torch.testing.assert_close(y.float(), (w.float() @ x.float()), rtol=2e-2, atol=2e-1)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for mode in (0, 1, 2):
        check(mode)
    for layers, tiny_n in ((48, 0), (48, 1), (48, 3)):
        row = [run(m, layers, 2048, tiny_n) for m in (0, 1, 2)]
        kernels = layers * (1 + 2 * tiny_n)
        print(f"{layers} gemv + {2 * tiny_n * layers} tiny ({kernels} kernels): no PDL {row[0]:.1f} us, "
              f"PDL wait-top {row[1]:.1f} us, PDL prefetch {row[2]:.1f} us; per kernel saved "
              f"{(row[0] - row[1]) / kernels:.2f} / {(row[0] - row[2]) / kernels:.2f} us")
