"""Issue 47 in one device call: the MoE targets with the "gemv" expert kernels (before) and the "grouped" set (after),
side by side on one engine per target (models/moe_kernel_sets.py set_moe_kernels, then the target's CUDA graphs
recaptured), in one process.

    python scripts/bench_moe_before_after.py --out results/bench_moe_ba [--targets qwen3-30b-a3b,gpt-oss-20b]

Per target and kernel set: plain decoding at each --concurrency, EAGLE-3 synthetic k = 3 (verify of 4 tokens a
request) at concurrency 1 (and 16 with --verify-concurrency 1,16), and the wall time of a --prefill-len prompt to
its first token (median of 3) against its bound: max(weight FLOPs / --peak-tflops, bytes of every weight it wakes /
copy bandwidth). Floors of the decode rows are specbench/perf/moe_floor.py's (the experts each step wakes, counted
once per target by the routing probe: the sets route alike). Writes OUT/bench.json (rows as measured) and OUT/bench.md
(the table, also printed).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench import LLM, SamplingParams  # noqa: E402
from specbench.models.presets import get_preset  # noqa: E402
from specbench.models.moe_kernel_sets import MOE_KERNEL_SETS, set_moe_kernels  # noqa: E402
from specbench.perf.gpu_perf import copy_bandwidth_gbps, measure_decode, random_prompts  # noqa: E402
from specbench.perf.moe_floor import mean_step_bytes, model_bytes  # noqa: E402
from specbench.perf.moe_perf import make_row  # noqa: E402
from specbench.perf.moe_routing_probe import probe_active_experts  # noqa: E402
from specbench.perf.moe_targets import TARGET_NAMES, resolve_target  # noqa: E402
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head  # noqa: E402

SYNTHETIC = (0.73, 0.52, 0.35)  # as scripts/bench_gpu.py: acceptance length 2.60 at k = 3
VERIFY_STEPS = 3


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


class Out:
    def __init__(self, path: Path, device: str) -> None:
        import triton  # noqa: PLC0415 - its version only

        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device,
                     "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__, "rows": {}}

    def put(self, key: str, value) -> None:
        self.data["rows"][key] = value
        (self.path / "bench.json").write_text(json.dumps(self.data, indent=2, default=str))
        print(f"[{time.strftime('%H:%M:%S')}] {key}: {json.dumps(value, default=str)[:300]}", flush=True)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def prefill_ms(llm: LLM, prompt_len: int, device: str, repeats: int = 3) -> float:
    """Wall ms of one prompt to its first token (the prefill forward, one sample, the host around them)."""
    vocab = llm.engine.runner.model.config.vocab_size
    llm.generate(random_prompts(vocab, 1, prompt_len, seed=99), SamplingParams(max_tokens=1, ignore_eos=True))
    times = []
    for i in range(repeats):
        prompts = random_prompts(vocab, 1, prompt_len, seed=100 + i)  # fresh prompts: no prefix-cache hit
        sync(device)
        start = time.perf_counter()
        llm.generate(prompts, SamplingParams(max_tokens=1, ignore_eos=True))
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def prefill_bound_ms(model, mb, prompt_len: int, bw_gbps: float, peak_tflops: float) -> dict:
    """A prompt_len prefill's bound: the weights' matmul FLOPs at the peak, or every expert woken read once."""
    moe = model.config.moe
    embed = model.embed_tokens.weight.numel()
    active_params = sum(p.numel() for p in model.parameters()) - embed
    per_layer_idle = (moe.num_experts - moe.num_experts_per_tok) * moe.num_params_per_expert()
    active_params -= per_layer_idle * len(mb.expert_bytes)
    compute_ms = 2 * active_params * prompt_len / (peak_tflops * 1e12) * 1e3
    # Every expert woken: at 1k tokens x top-k, an idle expert has probability (1 - k / E) ** 1024 ~ 0.
    expert_bytes = sum(b * moe.num_experts for b in mb.expert_bytes)
    bytes_ms = (mb.dense_bytes + expert_bytes) / (bw_gbps * 1e9) * 1e3
    return {"compute_ms": compute_ms, "bytes_ms": bytes_ms, "bound_ms": max(compute_ms, bytes_ms)}


def target_rows(out: Out, name: str, preset: str, args, bw: float, head_root: Path, *, device: str = "cuda",
                dtype: str = "bf16", num_kv_blocks: int | None = None, draft_vocab_size: int = 32000) -> None:
    """Every row of one target (`preset`: the engine's model), each kernel set in turn on the same engine. CPU (the
    script's test): no graphs, the "auto" kernel policy keeps the torch paths, so only the flow is exercised."""
    head_dir = write_dummy_eagle3_head(get_preset(preset), head_root / name / "eagle3",
                                       draft_vocab_size=draft_vocab_size)
    t0 = time.perf_counter()
    llm = LLM(preset, load_format="dummy", dtype=dtype, device=device, method="eagle3", draft=str(head_dir),
              max_num_steps=VERIFY_STEPS, synthetic_acceptance=SYNTHETIC, kv_cache_gb=args.kv_cache_gb,
              num_kv_blocks=num_kv_blocks, max_concurrency=max(args.concurrency + args.verify_concurrency),
              max_model_len=args.max_model_len)
    engine = llm.engine
    model = engine.runner.model
    mb = model_bytes(model)
    out.put(f"{name}:build", {"seconds": time.perf_counter() - t0, "cuda_graphs": engine.parts.cuda_graphs})
    common = {"prompt_len": args.prompt_len, "output_len": args.output_len, "bandwidth_gbps": bw}

    def step_bytes(counts, num_reqs: int, tokens_per_req: int):
        active = (list(counts.active_per_layer) if counts is not None
                  else [float(num_reqs * tokens_per_req)] * len(mb.expert_bytes))
        return mean_step_bytes(mb, num_reqs=num_reqs, tokens_per_req=tokens_per_req, num_active_experts=active,
                               prompt_len=args.prompt_len, output_len=args.output_len)

    # The experts each step kind wakes: routing is the same under both sets, so counted once (eager probe).
    counts = {}
    for conc in args.concurrency:
        counts[(conc, 0)] = probe_active_experts(llm, concurrency=conc, num_steps=0, prompt_len=args.prompt_len,
                                                 num_output_tokens=args.probe_len)
    for conc in args.verify_concurrency:
        counts[(conc, VERIFY_STEPS)] = probe_active_experts(llm, concurrency=conc, num_steps=VERIFY_STEPS,
                                                            prompt_len=args.prompt_len,
                                                            num_output_tokens=args.probe_len)
    bound = prefill_bound_ms(model, mb, args.prefill_len, bw, args.peak_tflops)
    if device == "cuda":
        from specbench.perf.moe_set_timing import time_expert_sets

        for num_tokens in args.kernel_tokens:
            try:
                out.put(f"{name}:experts_n{num_tokens}", time_expert_sets(model, num_tokens).to_dict())
            except Exception as err:  # noqa: BLE001 - the engine rows still run
                out.put(f"{name}:experts_n{num_tokens}_error", repr(err))
    for kernel_set in args.sets:
        set_moe_kernels(model, kernel_set)
        if engine.runner.graphs is not None and engine.runner.graphs.is_graph:
            engine.runner.graphs.recapture()  # the graphs keep the set they were captured with
        for conc in args.concurrency:
            row = measure_decode(llm, label="plain", concurrency=conc, num_steps=0, repeats=max(1, 4 // conc),
                                 **common)
            c = counts[(conc, 0)]
            out.put(f"{name}:{kernel_set}:plain_c{conc}",
                    make_row(name, row, c, step_bytes(c, conc, 1), bw).to_dict())
        for conc in args.verify_concurrency:
            row = measure_decode(llm, label="eagle3 synthetic", concurrency=conc, num_steps=VERIFY_STEPS,
                                 repeats=max(1, 4 // conc), **common)
            c = counts[(conc, VERIFY_STEPS)]
            out.put(f"{name}:{kernel_set}:eagle3_c{conc}",
                    make_row(name, row, c, step_bytes(c, conc, VERIFY_STEPS + 1), bw).to_dict())
        out.put(f"{name}:{kernel_set}:prefill", {"prompt_len": args.prefill_len,
                                                 "ttft_ms": prefill_ms(llm, args.prefill_len, device), **bound})
    set_moe_kernels(model, "gemv")
    del llm, engine, model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def table(data: dict, names: list[str], sets: list[str], concurrency: list[int], verify: list[int]) -> str:
    rows = data["rows"]
    head = ["target", "kernels"] + [f"plain c={c} % of floor (step ms / floor ms)" for c in concurrency]
    head += [f"verify (4 tok) c={c} % of its floor (target ms)" for c in verify]
    head += [f"verify/decode time vs bytes c={c}" for c in verify if c in concurrency]
    head += [f"EAGLE-3 k=3 / plain c={c}" for c in verify if c in concurrency]
    head += ["prefill TTFT ms (bound ms, x bound)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in names:
        for kernel_set in sets:
            def get(key, name=name, kernel_set=kernel_set):
                return rows.get(f"{name}:{kernel_set}:{key}")

            cells = [name, kernel_set]
            for c in concurrency:
                r = get(f"plain_c{c}")
                cells.append(f"{r['pct_of_floor']:.1f}% ({r['step_ms']:.2f} / {r['floor_ms']:.2f})" if r else "-")
            for c in verify:
                r = get(f"eagle3_c{c}")
                cells.append(f"{r['target_pct_of_floor']:.1f}% ({r['target_ms']:.2f})" if r else "-")
            for c in verify:
                if c not in concurrency:
                    continue
                p, v = get(f"plain_c{c}"), get(f"eagle3_c{c}")
                cells.append(f"{v['target_ms'] / p['target_ms']:.2f}x time for {v['floor_ms'] / p['floor_ms']:.2f}x "
                             f"bytes" if p and v else "-")
            for c in verify:
                if c not in concurrency:
                    continue
                p, v = get(f"plain_c{c}"), get(f"eagle3_c{c}")
                cells.append(f"{v['decode_tok_s'] / p['decode_tok_s']:.2f}x" if p and v else "-")
            r = get("prefill")
            cells.append(f"{r['ttft_ms']:.1f} ({r['bound_ms']:.1f}, {r['ttft_ms'] / r['bound_ms']:.1f}x)" if r else "-")
            lines.append("| " + " | ".join(cells) + " |")
    errors = [f"- {k}: {v.splitlines()[0]}" for k, v in rows.items() if k.endswith("error") and isinstance(v, str)]
    return "\n".join(lines + errors + kernel_table(data, names))


def kernel_table(data: dict, names: list[str]) -> list[str]:
    """The experts alone (specbench/perf/moe_set_timing.py), us per layer and % of the copy bandwidth."""
    bw = data["rows"].get("copy_bandwidth_gbps")
    found = [(name, v) for name in names for k, v in data["rows"].items()
             if k.startswith(f"{name}:experts_n") and isinstance(v, dict)]
    if not found or not bw:
        return []

    def cell(us: float, gb: float) -> str:
        return f"{us:.1f} ({100 * gb / bw / (us * 1e-6):.0f}%)"

    lines = ["", "Routed experts alone, us per layer (% of copy bandwidth):", "",
             "| target | tokens | experts woken | MB a layer | gemv | grouped | best down tiles (block_n x stages) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in found:
        lines.append(f"| {name} | {r['num_tokens']} | {r['mean_active_experts']:.1f} | {1e3 * r['gb_per_layer']:.1f} | "
                     f"{cell(r['gemv_us'], r['gb_per_layer'])} | {cell(r['grouped_us'], r['gb_per_layer'])} | "
                     f"{r['best_down']}: {cell(r['best_grouped_us'], r['gb_per_layer'])} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/bench_moe_before_after")
    ap.add_argument("--targets", default=",".join(TARGET_NAMES), type=lambda s: s.split(","))
    ap.add_argument("--sets", default=",".join(MOE_KERNEL_SETS), type=lambda s: s.split(","),
                    help=f"kernel sets in order, of {', '.join(MOE_KERNEL_SETS)}")
    ap.add_argument("--concurrency", default="1,16", type=ints)
    ap.add_argument("--verify-concurrency", default="1", type=ints, help="EAGLE-3 synthetic k=3 rows")
    ap.add_argument("--layers", type=int, help="cut each target to its first N layers (a quick look)")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--probe-len", type=int, default=16, help="output tokens of the eager expert-count probe")
    ap.add_argument("--prefill-len", type=int, default=1024)
    ap.add_argument("--kernel-tokens", default="4,16", type=ints,
                    help="token counts of the experts-alone rows (both sets, down tile candidates); '' to skip")
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100 SXM: 989)")
    ap.add_argument("--kv-cache-gb", type=float, default=6.0)
    ap.add_argument("--max-model-len", type=int, default=2048)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    bad = [t for t in args.targets if t not in TARGET_NAMES] + [s for s in args.sets if s not in MOE_KERNEL_SETS]
    if bad:
        ap.error(f"unknown target or kernel set {bad[0]!r}")
    out = Out(Path(args.out), torch.cuda.get_device_name())
    bw = copy_bandwidth_gbps()
    out.put("copy_bandwidth_gbps", bw)
    out.put("config", vars(args))
    with tempfile.TemporaryDirectory() as tmp:
        for done, name in enumerate(args.targets, 1):
            try:
                target_rows(out, name, resolve_target(name, args.layers).preset, args, bw, Path(tmp))
            except Exception as err:  # noqa: BLE001 - one target's failure must not lose the other's rows
                import traceback

                out.put(f"{name}:error", f"{err!r}\n{traceback.format_exc()}")
                gc.collect()
                torch.cuda.empty_cache()
            write_table(out, args, bw, args.targets[:done])  # after each target: a time-out keeps the table so far


def write_table(out: Out, args, bw: float, names: list[str]) -> None:
    md = (f"{out.data['device']}, {out.data['date']}, torch {out.data['torch']}, CUDA {out.data['cuda']}, "
          f"Triton {out.data['triton']}; copy bandwidth {bw:.0f} GB/s\n\n"
          + table(out.data, names, args.sets, args.concurrency, args.verify_concurrency) + "\n")
    (out.path / "bench.md").write_text(md)
    print(md, flush=True)


if __name__ == "__main__":
    main()
