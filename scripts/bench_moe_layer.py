"""A whole MoE decoder layer at decode batch sizes, before and after the fused attention half and routing.

    python scripts/bench_moe_layer.py [--presets qwen3-30b-a3b,gpt-oss-20b] [--tokens 1,16,64] [--layers 4]

"old chain" is what a MoE layer ran before models/decode_gemv.py took MoE layers: add+RMSNorm kernel, cuBLAS qkv
(+ bias), the q and k norms, RoPE and the K/V store as kernels of their own, attention, cuBLAS o_proj (+ bias), add+
RMSNorm, then the MoE forward with its router GEMM and routing + sort as two kernels (kernels/moe_route.py
router_logits, route_and_sort). "new chain" is the layer as the engine runs it now: qkv as a gemv with the bias in
its epilogue (and RoPE + the K/V store for heads without a q/k norm; Qwen3's q/k norm + RoPE + store as one kernel
after it), o_proj + bias + residual as one gemv, and the routing as one launch (router_route_sort). The routed
experts (kernels/moe_gemv.py) are the same in both.

Each timing is a CUDA graph of `--layers` layers on distinct weights, replayed (scripts' graphed_ms): nothing but the
routing's small tensors stays in L2. Dummy bf16 weights, one token per request, `--context` keys cached per request.
The floor is the bytes a layer must read (attention weights, router, the experts the batch wakes, its KV) at the
measured copy bandwidth. Prints markdown tables; fails loudly if the new layer's output drifts from the old one's.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
import triton

from specbench.attention import build_metadata, create_backend
from specbench.attention.backend import UncheckedBackend
from specbench.perf.gpu_perf import copy_bandwidth_gbps
from specbench.perf.graph_timing import graphed_ms
from specbench.kv.kv_cache import KVCache
from specbench.models import DecoderLM, decode_gemv, fused_kernels, get_preset, moe_forward
from specbench.models.moe import MoeMLP
from specbench.models.moe_routing import ExpertRouting

BLOCK_SIZE = 16
DEVICE, DTYPE = "cuda", torch.bfloat16  # the tests dry-run it on the CPU interpreter in fp32


def old_fused_route(self: MoeMLP, x: torch.Tensor, is_real_token: torch.Tensor | None = None, norm=None):
    """The routing before router_route_sort: the router GEMM kernel, then routing + sort in a second one (the norm
    its own kernel before it: OldChain keeps it out of the routing)."""
    assert norm is None
    from specbench.kernels.moe_route import route_and_sort, router_logits

    c = self.config
    logits = router_logits(x if x.stride(-1) == 1 else x.contiguous(), self.router.weight, self.router.bias)
    ids, weights, order = route_and_sort(
        logits, top_k=c.num_experts_per_tok, scoring=c.scoring, norm_topk_prob=c.norm_topk_prob,
        routed_scaling_factor=c.routed_scaling_factor, correction_bias=self.score_correction_bias,
        is_real_token=is_real_token)
    return ExpertRouting(topk_ids=ids, topk_weights=weights), order


class OldChain:
    """Within the block: MoE layers off decode_gemv and on the two-kernel routing (bench-only patching)."""

    def __enter__(self):
        self.applies, self.route, self.rides = decode_gemv.applies, MoeMLP.fused_route, moe_forward.norm_rides_in_router
        decode_gemv.applies = lambda layer, x: False
        MoeMLP.fused_route = old_fused_route
        moe_forward.norm_rides_in_router = lambda mlp, norm, x: False

    def __exit__(self, *exc):
        decode_gemv.applies, MoeMLP.fused_route, moe_forward.norm_rides_in_router = self.applies, self.route, self.rides


class Setup:
    def __init__(self, preset: str, num_layers: int, num_tokens: int, context: int) -> None:
        config = replace(get_preset(preset), num_hidden_layers=num_layers, vocab_size=1024, num_mtp_modules=0,
                         moe_layer_ids=tuple(range(num_layers)),
                         attention_kinds=get_preset(preset).attention_kinds[:num_layers])
        self.config = config
        self.backend = create_backend("triton")
        self.model = DecoderLM(config, self.backend, dtype=DTYPE, device=DEVICE)
        self.model.init_random_weights(seed=0)
        fused_kernels.set_policy(self.model, "on")
        blocks_per_req = triton.cdiv(context + 1, BLOCK_SIZE)
        self.kv = KVCache(self.model.kv_cache_spec(), num_tokens * blocks_per_req + 1, BLOCK_SIZE, DEVICE)
        md = build_metadata(positions=[context] * num_tokens, num_query=[1] * num_tokens,
                            seq_lens=[context + 1] * num_tokens,
                            block_tables=[list(range(1 + r * blocks_per_req, 1 + (r + 1) * blocks_per_req))
                                          for r in range(num_tokens)], block_size=BLOCK_SIZE, device=DEVICE)
        self.md = self.model.layer_kinds.attach(md, "target")
        self.backend.begin_forward(self.md, "target")
        self.cos_sin = self.model.rotary.cos_sin(self.md.positions, self.md.max_seq_len)
        gen = torch.Generator(device=DEVICE).manual_seed(1)
        self.hidden = torch.randn(num_tokens, config.hidden_size, device=DEVICE, generator=gen).to(DTYPE)
        self.residual = torch.randn(num_tokens, config.hidden_size, device=DEVICE, generator=gen).to(DTYPE)
        self.unchecked = UncheckedBackend(self.backend)

    def layer(self, i: int):
        return self.model.layers[i](self.hidden, self.residual, self.cos_sin, self.kv, self.md, self.unchecked)

    def stream_out(self, i: int) -> torch.Tensor:  # [num_tokens, hidden] the stream leaving layer i
        out = self.layer(i)
        return out.hidden if out.residual is None else out.hidden + out.residual

    def floor_bytes(self) -> int:
        """Weights of the attention half, the router and the experts this batch wakes, plus the KV read."""
        c, layer = self.config, self.model.layers[0]
        attn = sum(p.numel() * p.element_size() for p in layer.self_attn.parameters())
        norms = 2 * c.hidden_size * 2
        mlp = layer.mlp
        normed = layer.post_attention_layernorm(self.hidden)
        routing = mlp.route(normed)
        num_active = int(torch.unique(routing.topk_ids).numel())
        per_expert = (mlp.gate_up_weight[0].numel() + mlp.down_weight[0].numel()) * 2
        if mlp.gate_up_bias is not None:
            per_expert += (mlp.gate_up_bias[0].numel() + mlp.down_bias[0].numel()) * 2
        router = sum(p.numel() * p.element_size() for p in mlp.router.parameters())
        kv_bytes_per_key = 2 * c.num_key_value_heads * c.head_dim * 2
        # Keys a layer reads, averaged over the layers (gpt-oss alternates windows of 128 with full attention).
        windows = [k.kv_window for k in self.model.layer_kinds.kinds]
        keys = sum(sum(min(n, w or n) for n in self.md.seq_lens_cpu) for w in windows) / len(windows)
        self.num_active = num_active
        return int(attn + norms + router + num_active * per_expert + keys * kv_bytes_per_key)


def components(s: Setup, num_layers: int) -> list[tuple[str, float, float]]:
    """(kernel group, old us, new us), each a graph of num_layers calls on distinct layers."""
    from specbench.kernels import kv_store, qk_norm_rope, rms_norm, rope
    from specbench.kernels.gemv import gemv
    from specbench.kernels.gemv_rope import RopeStore
    from specbench.kernels.moe_route import route_and_sort, router_logits, router_route_sort

    layers, n = s.model.layers, s.hidden.shape[0]
    attn = [layer.self_attn for layer in layers]
    x = s.hidden
    rows = []

    def both(name, old, new):
        rows.append((name, graphed_ms(old, num_layers) * 1e3, graphed_ms(new, num_layers) * 1e3))

    def route_kwargs(mlp):
        c = mlp.config
        return {"top_k": c.num_experts_per_tok, "scoring": c.scoring, "norm_topk_prob": c.norm_topk_prob,
                "routed_scaling_factor": c.routed_scaling_factor, "correction_bias": mlp.score_correction_bias}

    def old_route(i):
        mlp = layers[i].mlp
        mask = s.md.slot_mapping != -1
        route_and_sort(router_logits(x, mlp.router.weight, mlp.router.bias), is_real_token=mask, **route_kwargs(mlp))

    def new_route(i):
        mlp = layers[i].mlp
        mask = s.md.slot_mapping != -1
        router_route_sort(x, mlp.router.weight, mlp.router.bias, mlp.route_counter, is_real_token=mask,
                          **route_kwargs(mlp))

    both("mask + router + top-k + sort", old_route, new_route)
    both("qkv (+ bias)", lambda i: torch.nn.functional.linear(x, attn[i].qkv_proj.weight, attn[i].qkv_proj.bias),
         lambda i: gemv(x, attn[i].qkv_proj.weight, bias=attn[i].qkv_proj.bias))
    a = attn[0]
    qkv = torch.nn.functional.linear(x, a.qkv_proj.weight, a.qkv_proj.bias)
    k_cache, v_cache = s.kv.k, s.kv.v
    if a.q_norm is not None:
        eps = a.q_norm.eps

        def old_qk(i):
            q, k, v = qkv.split([a.q_size, a.kv_size, a.kv_size], dim=-1)
            q = rms_norm.rms_norm(q.reshape(n, a.num_heads, a.head_dim), attn[i].q_norm.weight, eps)[0]
            k = rms_norm.rms_norm(k.reshape(n, a.num_kv_heads, a.head_dim), attn[i].k_norm.weight, eps)[0]
            rope.apply_rope_(q, k, None, s.cos_sin)
            kv_store.store_kv(k, v.view(n, a.num_kv_heads, a.head_dim), k_cache[i], v_cache[i], s.md.slot_mapping)

        both("q/k norm + RoPE + K/V store", old_qk, lambda i: qk_norm_rope.qk_norm_rope_store(
            qkv, attn[i].q_norm.weight, attn[i].k_norm.weight, eps, s.cos_sin, s.md.slot_mapping, k_cache[i],
            v_cache[i], a.num_heads, a.num_kv_heads))
    else:
        def old_rope_store(i):
            y = torch.nn.functional.linear(x, attn[i].qkv_proj.weight, attn[i].qkv_proj.bias)
            q, k, v = y.split([a.q_size, a.kv_size, a.kv_size], dim=-1)
            q, k = q.reshape(n, a.num_heads, a.head_dim), k.reshape(n, a.num_kv_heads, a.head_dim)
            rope.apply_rope_(q, k, None, s.cos_sin)
            kv_store.store_kv(k, v.view(n, a.num_kv_heads, a.head_dim), k_cache[i], v_cache[i], s.md.slot_mapping)

        both("qkv + bias + RoPE + K/V store", old_rope_store, lambda i: gemv(
            x, attn[i].qkv_proj.weight, bias=attn[i].qkv_proj.bias,
            rope=RopeStore(s.cos_sin, s.md.slot_mapping, k_cache[i], v_cache[i], a.num_heads, a.num_kv_heads,
                           a.head_dim)))
    o_in = torch.randn(n, a.q_size, device=DEVICE).to(DTYPE)
    # The old chain's residual add rides in the next add+RMSNorm kernel: its o_proj is the GEMM alone.
    both("o_proj (+ bias) (new: + residual)", lambda i: torch.nn.functional.linear(o_in, attn[i].o_proj.weight,
                                                                                   attn[i].o_proj.bias),
         lambda i: gemv(o_in, attn[i].o_proj.weight, residual=s.residual, bias=attn[i].o_proj.bias))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default="qwen3-30b-a3b,gpt-oss-20b")
    ap.add_argument("--tokens", default="1,16,64")
    ap.add_argument("--layers", type=int, default=4, help="distinct layers per graph (each reads its own weights)")
    ap.add_argument("--context", type=int, default=1024, help="keys cached per request")
    args = ap.parse_args()
    start = time.time()
    bw = copy_bandwidth_gbps()
    print(f"device {torch.cuda.get_device_name()}, copy bandwidth {bw:.0f} GB/s, torch {torch.__version__}, "
          f"triton {triton.__version__}, {args.layers} layers a graph, context {args.context}")
    for preset in args.presets.split(","):
        print(f"\n## {preset}\n")
        print("| tokens | experts woken | floor us | old chain us | new chain us | speed-up | new % of floor | "
              "max rel. diff |")
        print("|---|---|---|---|---|---|---|---|")
        kernel_rows = []
        for m in (int(t) for t in args.tokens.split(",")):
            s = Setup(preset, args.layers, m, args.context)
            with torch.no_grad():
                with OldChain():
                    old_out = s.stream_out(0).float()
                    old_us = graphed_ms(s.layer, args.layers) * 1e3
                new_out = s.stream_out(0).float()
                new_us = graphed_ms(s.layer, args.layers) * 1e3
                diff = ((new_out - old_out).norm() / old_out.norm()).item()
                if not diff < 2e-2:
                    raise AssertionError(f"{preset} at {m} tokens: new layer differs from the old by {diff:.3e}")
                floor_us = s.floor_bytes() / bw / 1e3
                print(f"| {m} | {s.num_active} | {floor_us:.1f} | {old_us:.1f} | {new_us:.1f} | "
                      f"{old_us / new_us:.2f}x | {100 * floor_us / new_us:.0f}% | {diff:.1e} |")
                kernel_rows += [(m, *row) for row in components(s, args.layers)]
            del s
            torch.cuda.empty_cache()
        print("\n| tokens | kernels | old us | new us |")
        print("|---|---|---|---|")
        for m, name, old, new in kernel_rows:
            print(f"| {m} | {name} | {old:.1f} | {new:.1f} |")
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
