"""The MoE routing launch alone (kernels/moe_route.py `router_route_sort`: router GEMM, top-k, weights and the sort
by expert in one kernel) at decode and verify batch sizes, under its default tiles and candidates, per MoE preset.

    python scripts/bench_moe_router.py [--presets qwen3-30b-a3b,gpt-oss-20b,qwen3-next-80b-a3b] [--tokens 1,4,16]

Each timing is a CUDA graph of one launch per layer on `--layers` distinct router weights (graphed_ms), replayed; us
per launch. `floor us` is the router weight's bytes over the measured copy bandwidth. Every candidate's experts are
checked against the default's (a MISMATCH never wins). GPU only.
"""

from __future__ import annotations

import argparse

import torch

from specbench.models.presets import get_preset
from specbench.perf.graph_timing import graphed_ms

# (hidden columns a program, experts a program, warps; 0 = the launcher's choice)
CANDIDATES = [(256, 16, 0), (256, 16, 4), (256, 32, 4), (512, 16, 4), (128, 16, 4), (256, 16, 8), (512, 32, 8),
              (1024, 16, 4), (256, 64, 4)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="qwen3-30b-a3b,gpt-oss-20b,qwen3-next-80b-a3b")
    ap.add_argument("--tokens", default="1,4,16")
    ap.add_argument("--layers", type=int, default=8)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    from specbench.kernels.moe_route import RouterTiles, default_router_tiles, router_route_sort
    from specbench.perf.gpu_perf import copy_bandwidth_gbps

    gbps = copy_bandwidth_gbps()
    print(f"{torch.cuda.get_device_name()}, copy bandwidth {gbps:.0f} GB/s, {args.layers} router weights")
    print("| preset | tokens | experts / top-k / hidden | floor us | default tiles | default us | best tiles | best us |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.presets.split(","):
        moe = get_preset(name).moe
        if moe is None:
            ap.error(f"preset {name!r} has no MoE layers")
        gen = torch.Generator(device="cuda").manual_seed(0)
        weights = [torch.randn(moe.num_experts, moe.hidden_size, device="cuda", dtype=torch.bfloat16,
                               generator=gen) * 0.02 for _ in range(args.layers)]
        biases = [torch.randn(moe.num_experts, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.02
                  if moe.has_router_bias else None for _ in range(args.layers)]
        counters = [torch.zeros(1, dtype=torch.int32, device="cuda") for _ in range(args.layers)]
        floor_us = moe.num_experts * moe.hidden_size * 2 / gbps / 1e3
        for num_tokens in [int(t) for t in args.tokens.split(",")]:
            x = torch.randn(num_tokens, moe.hidden_size, device="cuda", dtype=torch.bfloat16, generator=gen)

            def call(i, tiles):
                return router_route_sort(x, weights[i], biases[i], counters[i], top_k=moe.num_experts_per_tok,
                                         scoring=moe.scoring, norm_topk_prob=moe.norm_topk_prob,
                                         routed_scaling_factor=moe.routed_scaling_factor, correction_bias=None,
                                         is_real_token=None, tiles=tiles)

            default = default_router_tiles(moe.hidden_size, 2)
            want = call(0, default)[0]
            results = []
            for block_h, block_e, warps in CANDIDATES:
                tiles = RouterTiles(block_h=min(block_h, moe.hidden_size), block_e=block_e, num_warps=warps)
                if not torch.equal(call(0, tiles)[0], want):
                    print(f"  {name} {num_tokens} tokens {tiles}: MISMATCH")
                    continue
                results.append((graphed_ms(lambda i, t=tiles: call(i, t), args.layers) * 1e3, tiles))
            default_us = graphed_ms(lambda i: call(i, default), args.layers) * 1e3
            best_us, best = min(results, key=lambda r: r[0])
            print(f"| {name} | {num_tokens} | {moe.num_experts} / {moe.num_experts_per_tok} / {moe.hidden_size} | "
                  f"{floor_us:.2f} | {default} | {default_us:.1f} | {best} | {best_us:.1f} |", flush=True)
            for us, tiles in sorted(results, key=lambda r: r[0]):
                print(f"    {us:7.1f} us  {tiles}")


if __name__ == "__main__":
    main()
