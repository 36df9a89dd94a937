"""Engine decode benchmark at real shapes (dummy weights): step time vs the memory-bandwidth floor.

    python scripts/bench_decode.py --preset llama-3.1-8b --concurrency 1,16,64 [--json out.json]

Floor per decode step = bytes that must be read (all weights + the KV of every running request) /
measured device-to-device copy bandwidth (bytes read + written). Decode step time is the median
engine step of the decode phase (StepStats.step_ms, wall time around one whole step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from specbench import LLM, SamplingParams


def copy_bandwidth_gbps(num_bytes: int = 2 << 30, repeats: int = 10) -> float:
    src = torch.empty(num_bytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    return 2 * num_bytes * repeats / (start.elapsed_time(end) / 1e3) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="llama-3.1-8b")
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--method", default="none")
    ap.add_argument("--num-steps", type=int, default=0)
    ap.add_argument("--draft", default=None, help="draft preset/path for --method draft (dummy weights)")
    ap.add_argument("--synthetic-acceptance", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    bw = copy_bandwidth_gbps()
    kwargs = {}
    if args.synthetic_acceptance:
        kwargs["synthetic_acceptance"] = tuple(float(x) for x in args.synthetic_acceptance.split(","))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    t0 = time.perf_counter()
    llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", kv_cache_gb=16,
              max_concurrency=max(concurrencies), method=args.method, num_steps=args.num_steps, draft=args.draft, **kwargs)
    load_s = time.perf_counter() - t0
    model = llm.engine.runner.model
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    kv_spec = model.kv_cache_spec()
    kv_bytes_per_token = kv_spec.bytes_per_block(1)
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    rows = []
    for conc in concurrencies:
        prompts = [torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist() for _ in range(conc)]
        params = SamplingParams(max_tokens=args.output_len, ignore_eos=True)
        llm.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True))  # warm-up
        first = len(llm.engine.step_stats)
        start = time.perf_counter()
        outs = llm.generate(prompts, params)
        wall = time.perf_counter() - start
        steps = [s for s in llm.engine.step_stats[first:] if s.phase == "decode" and s.num_reqs == conc]
        step_ms = statistics.median(s.step_ms for s in steps)
        tokens_per_step = statistics.mean(
            (s.num_accepted_tokens + s.num_reqs) / s.num_reqs for s in steps
        )
        avg_context = args.prompt_len + args.output_len / 2
        floor_ms = (weight_bytes + conc * avg_context * kv_bytes_per_token) / (bw * 1e9) * 1e3
        out_tokens = sum(len(o.output_token_ids) for o in outs)
        rows.append({
            "concurrency": conc,
            "step_ms_median": step_ms,
            "target_ms_median": statistics.median(s.target_ms for s in steps),
            "draft_ms_median": statistics.median(s.draft_ms for s in steps),
            "floor_ms": floor_ms,
            "pct_of_floor": 100 * floor_ms / step_ms,
            "tokens_per_step_per_req": tokens_per_step,
            "decode_tok_s": conc * tokens_per_step / (step_ms / 1e3),
            "end_to_end_tok_s": out_tokens / wall,
        })
    result = {
        "device": torch.cuda.get_device_name(),
        "copy_bandwidth_gbps": bw,
        "weight_gb": weight_bytes / 1e9,
        "load_s": load_s,
        "attention_backend": llm.engine.parts.attention_backend,
        "verifier": llm.engine.parts.verifier,
        "method": args.method,
        "num_steps": args.num_steps,
        "synthetic_acceptance": args.synthetic_acceptance,
        "kv_pool": llm.engine.parts.kv_pool_note,
        "peak_gpu_mem_gb": torch.cuda.max_memory_allocated() / 1e9,
        "rows": rows,
    }
    print(f"{result['device']}  copy bw {bw:.0f} GB/s  weights {result['weight_gb']:.2f} GB  "
          f"backend {result['attention_backend']}  method {args.method} k={args.num_steps}")
    print(f"{'conc':>5} {'step ms':>8} {'target ms':>9} {'draft ms':>8} {'floor ms':>8} {'% floor':>7} "
          f"{'tok/step':>8} {'decode tok/s':>12} {'e2e tok/s':>9}")
    for r in rows:
        print(f"{r['concurrency']:>5} {r['step_ms_median']:>8.2f} {r['target_ms_median']:>9.2f} "
              f"{r['draft_ms_median']:>8.2f} {r['floor_ms']:>8.2f} {r['pct_of_floor']:>6.1f}% "
              f"{r['tokens_per_step_per_req']:>8.2f} {r['decode_tok_s']:>12.1f} {r['end_to_end_tok_s']:>9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
