"""Issue-5 benchmark in one command on a GPU machine: engine vs the bandwidth floor, verify vs decode cost,
EAGLE-3-shaped head with synthetic acceptance, HF transformers generate, Triton vs flashinfer.

    python scripts/bench_gpu.py --out results/bench_gpu [--skip-hf-static] [--skip-flashinfer]
    python scripts/bench_gpu.py --suite moe --out results/bench_moe    # issue 27: the MoE targets only
    python scripts/bench_gpu.py --suite tree --concurrency 1,16 --out results/bench_tree    # issue 28: trees
    python scripts/bench_gpu.py --suite chunked --concurrency 16 --out results/bench_chunked    # issue 43

`--suite dense` (the default) is the Llama-shaped run above; `--suite moe` runs the MoE targets (Qwen3-30B-A3B- and
gpt-oss-20b-shaped: specbench/perf/moe_perf.py) with a floor of the bytes each step actually reads; `--suite tree`
runs plain, the EAGLE-3 chain (k = 3) and EAGLE-3 trees (SGLang's topk 4 / 8 tokens / 5 steps, and topk 2 / 6 / 3)
on one engine, each at its calibrated synthetic acceptance (specbench/perf/tree_perf.py states the definition);
`--suite chunked` runs a mixed load on the --preset shapes (specbench/perf/chunked_perf.py): --concurrency requests
decoding (plain, and EAGLE-3 synthetic k = 3) when --num-long prompts of --long-prompt-len tokens arrive, chunked
prefill off and on (--chunk-budget tokens per step): the running requests' TPOT / inter-emission latency and the long
prompts' TTFT. `--suite prefix` runs a shared-prefix multi-turn workload on the EAGLE-3 engine with prefix caching off, then on
(TTFT, throughput, hit rate, acceptance on hits vs misses: specbench/perf/prefix_perf.py); `--suite all` runs dense, tree and moe.

Every section appends to OUT/bench.json as it finishes (a time-out keeps what was measured); the markdown
table for BENCHMARKS.md is printed last and written to OUT/bench.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import torch

from specbench import LLM
from specbench.perf.gpu_perf import GraphsOff, copy_bandwidth_gbps, measure_decode, weight_bytes
from specbench.models.presets import get_preset
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

SYNTHETIC = (0.73, 0.52, 0.35)  # Llama-3.1-8B + EAGLE-3 on MT-Bench, k = 3 (acceptance length 2.60)


class Results:
    def __init__(self, out: Path) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        import transformers
        import triton

        self.data: dict = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                           "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "triton": triton.__version__,
                           "transformers": transformers.__version__, "sections": {}}

    def put(self, section: str, value) -> None:
        self.data["sections"][section] = value
        (self.out / "bench.json").write_text(json.dumps(self.data, indent=2, default=str))
        print(f"[{time.strftime('%H:%M:%S')}] {section}: {json.dumps(value, default=str)[:400]}", flush=True)


def _repeats(concurrency: int) -> int:
    """Batches per measurement: at least ~400 request-rounds of synthetic acceptance at every concurrency."""
    return max(1, 4 // concurrency)


def engine_section(res: Results, args, bw: float, head_dir: Path) -> None:
    t0 = time.perf_counter()
    llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", method="eagle3", draft=str(head_dir),
              max_num_steps=3, synthetic_acceptance=SYNTHETIC, kv_cache_gb=args.kv_cache_gb,
              max_concurrency=max(args.concurrency), max_model_len=args.max_model_len)
    engine = llm.engine
    res.put("engine_build", {"seconds": time.perf_counter() - t0, "kv_pool": engine.parts.kv_pool_note,
                             "cuda_graphs": engine.parts.cuda_graphs,
                             "num_target_graphs": engine.runner.graphs.num_graphs,
                             "weights_gb": weight_bytes(engine.runner.model) / 1e9,
                             "draft_weights_gb": weight_bytes(engine.proposer.head) / 1e9})
    common = dict(prompt_len=args.prompt_len, output_len=args.output_len, bandwidth_gbps=bw)
    rows = []
    for conc in args.concurrency:  # before/after side by side: the one-step loop, then overlapped decoding
        rows.append(measure_decode(llm, label="plain, one step at a time", concurrency=conc, num_steps=0,
                                   repeats=_repeats(conc), async_scheduling=False, **common))
        res.put(f"plain_sync_c{conc}", rows[-1].to_dict())
        rows.append(measure_decode(llm, label="plain", concurrency=conc, num_steps=0, repeats=_repeats(conc), **common))
        res.put(f"plain_c{conc}", rows[-1].to_dict())
    for conc in args.concurrency:  # the same side by side: rounds one at a time, then drafted ahead
        rows.append(measure_decode(llm, label="eagle3 synthetic, one round at a time", concurrency=conc, num_steps=3,
                                   repeats=_repeats(conc), async_scheduling=False, **common))
        res.put(f"eagle3_sync_c{conc}", rows[-1].to_dict())
        rows.append(measure_decode(llm, label="eagle3 synthetic", concurrency=conc, num_steps=3, repeats=_repeats(conc),
                                   **common))
        res.put(f"eagle3_c{conc}", rows[-1].to_dict())
    with GraphsOff(engine):
        for conc in (1,):
            rows.append(measure_decode(llm, label="plain eager", concurrency=conc, num_steps=0, **common))
            res.put(f"plain_eager_c{conc}", rows[-1].to_dict())
            rows.append(measure_decode(llm, label="eagle3 synthetic eager", concurrency=conc, num_steps=3, **common))
            res.put(f"eagle3_eager_c{conc}", rows[-1].to_dict())
    res.put("peak_gpu_mem_gb_engine", torch.cuda.max_memory_allocated() / 1e9)
    del llm, engine
    gc.collect()
    torch.cuda.empty_cache()


def flashinfer_section(res: Results, args, bw: float) -> None:
    common = dict(prompt_len=args.prompt_len, output_len=args.output_len, bandwidth_gbps=bw)
    rows = {}
    for backend in ("flashinfer", "triton"):
        t0 = time.perf_counter()
        llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", attention_backend=backend,
                  enforce_eager=True, kv_cache_gb=args.kv_cache_gb, max_concurrency=max(args.concurrency),
                  max_model_len=args.max_model_len)
        resolved = llm.engine.parts.attention_backend
        rows[backend] = {"resolved": resolved, "build_s": time.perf_counter() - t0}
        for conc in args.concurrency:
            row = measure_decode(llm, label=f"plain eager {resolved}", concurrency=conc, num_steps=0, **common)
            rows[backend][f"c{conc}"] = row.to_dict()
        res.put(f"attention_{backend}", rows[backend])
        del llm
        gc.collect()
        torch.cuda.empty_cache()


def hf_section(res: Results, args) -> None:
    from specbench.perf.hf_baseline import run_hf_baseline

    runs = [("dynamic", False, args.concurrency)]
    if not args.skip_hf_static:
        runs.append(("static", True, (1,)))
    for cache, compile_, sizes in runs:
        out = run_hf_baseline(args.preset, batch_sizes=tuple(sizes), prompt_len=args.prompt_len,
                              output_len=args.output_len, cache=cache, compile=compile_, device="cuda",
                              dtype=torch.bfloat16)
        res.put(f"hf_{cache}{'_compiled' if compile_ else ''}", [asdict(r) for r in out])
        gc.collect()
        torch.cuda.empty_cache()


def tree_section(res: Results, args, bw: float, head_dir: Path) -> None:
    from specbench.perf.tree_perf import ENGINE_RATES, MAX_STEPS, tree_suite

    t0 = time.perf_counter()
    llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", method="eagle3", draft=str(head_dir),
              max_num_steps=MAX_STEPS, synthetic_acceptance=ENGINE_RATES, kv_cache_gb=args.kv_cache_gb,
              max_concurrency=max(args.concurrency), max_model_len=args.max_model_len)
    res.put("tree_engine_build", {"seconds": time.perf_counter() - t0, "cuda_graphs": llm.engine.parts.cuda_graphs})
    tree_suite(res.put, llm, tuple(args.concurrency), _repeats, prompt_len=args.prompt_len,
               output_len=args.output_len, bandwidth_gbps=bw)
    del llm
    gc.collect()
    torch.cuda.empty_cache()


def chunked_section(res: Results, args, head_dir: Path) -> str:
    """The mixed-load rows (perf/chunked_perf.py); returns their markdown table."""
    from specbench.perf.chunked_perf import MixedLoad, chunked_suite, chunked_table

    t0 = time.perf_counter()
    llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", method="eagle3", draft=str(head_dir),
              max_num_steps=3, synthetic_acceptance=SYNTHETIC, kv_cache_gb=args.kv_cache_gb,
              max_concurrency=max(args.concurrency) + args.num_long, max_model_len=args.max_model_len)
    res.put("chunked_engine_build", {"seconds": time.perf_counter() - t0, "cuda_graphs": llm.engine.parts.cuda_graphs})
    loads = tuple(MixedLoad(concurrency=c, prompt_len=args.prompt_len, output_len=args.output_len,
                            long_prompt_len=args.long_prompt_len, num_long=args.num_long) for c in args.concurrency)
    rows = chunked_suite(res.put, llm, loads, budget=args.chunk_budget)
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    return chunked_table(rows)


def prefix_section(res: Results, args, head_dir: Path) -> None:
    from specbench.perf.prefix_perf import PrefixWorkload, prefix_suite

    vocab = get_preset(args.preset).vocab_size
    workload = PrefixWorkload(num_conversations=max(args.concurrency), num_turns=4, system_len=1024, user_len=64,
                              output_len=64, vocab_size=vocab)
    warmup = PrefixWorkload(num_conversations=2, num_turns=1, system_len=64, user_len=16, output_len=8,
                            vocab_size=vocab, seed=1)

    def build(is_on: bool):
        gc.collect()
        torch.cuda.empty_cache()
        return LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", method="eagle3",
                   draft=str(head_dir), max_num_steps=3, synthetic_acceptance=SYNTHETIC, kv_cache_gb=args.kv_cache_gb,
                   max_concurrency=max(args.concurrency), max_model_len=args.max_model_len,
                   enable_prefix_caching=is_on)

    prefix_suite(res.put, build, workload, num_steps=3, warmup=warmup)
    gc.collect()
    torch.cuda.empty_cache()


def moe_section(res: Results, args, bw: float) -> None:
    from specbench.perf.moe_perf import MoeRun, moe_suite

    run = MoeRun(concurrency=tuple(args.concurrency), prompt_len=args.prompt_len, output_len=args.output_len,
                 kv_cache_gb=args.kv_cache_gb, max_model_len=args.max_model_len, synthetic_acceptance=SYNTHETIC,
                 hf_output_len=args.moe_hf_output_len, is_hf_skipped=args.skip_hf)
    with tempfile.TemporaryDirectory() as tmp:
        def head_dir_for(config) -> Path:
            return write_dummy_eagle3_head(config, Path(tmp) / config.architecture / "eagle3", draft_vocab_size=32000)

        moe_suite(res.put, args.moe_targets, run, bw, num_layers=args.moe_layers, head_dir_for=head_dir_for)


def main() -> None:
    from specbench.perf.moe_targets import TARGET_NAMES

    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", choices=("dense", "moe", "tree", "chunked", "prefix", "all"), default="dense",
                    help="dense: the --preset rows; moe: the MoE targets; tree: plain, chain and tree rows (issue 28); "
                    "chunked: chunked prefill off vs on under a mixed load; prefix: shared-prefix multi-turn, prefix "
                    "caching off vs on (issue 43); all: dense, moe and tree")
    ap.add_argument("--long-prompt-len", type=int, default=3072, help="--suite chunked: the arriving prompts' length")
    ap.add_argument("--num-long", type=int, default=2, help="--suite chunked: long prompts arriving together")
    ap.add_argument("--chunk-budget", type=int, default=512,
                    help="--suite chunked: max_num_batched_tokens, each step's token budget with chunking on")
    ap.add_argument("--preset", default="llama-3.1-8b")
    ap.add_argument("--moe-targets", default=",".join(TARGET_NAMES), type=lambda s: s.split(","),
                    help=f"comma-separated, of {', '.join(TARGET_NAMES)}")
    ap.add_argument("--moe-layers", type=int, help="cut each MoE target to its first N layers (engine and HF)")
    ap.add_argument("--moe-hf-output-len", type=int, default=64, help="HF generate's output tokens on MoE targets")
    ap.add_argument("--concurrency", default="1,16,64", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--kv-cache-gb", type=float, default=8.0)
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--out", default="results/bench_gpu")
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-hf-static", action="store_true")
    ap.add_argument("--skip-flashinfer", action="store_true")
    args = ap.parse_args()
    unknown = [t for t in args.moe_targets if t not in TARGET_NAMES]
    if unknown:
        ap.error(f"unknown MoE target {unknown[0]!r}; supported: {', '.join(TARGET_NAMES)}")
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")

    res = Results(Path(args.out))
    bw = copy_bandwidth_gbps()
    res.put("copy_bandwidth_gbps", bw)
    res.put("config", {k: v for k, v in vars(args).items()})
    if args.suite in ("dense", "all"):
        if not args.skip_engine:
            with tempfile.TemporaryDirectory() as tmp:
                head_dir = write_dummy_eagle3_head(get_preset(args.preset), Path(tmp) / "eagle3",
                                                   draft_vocab_size=32000)
                engine_section(res, args, bw, head_dir)
        if not args.skip_flashinfer:
            flashinfer_section(res, args, bw)
        if not args.skip_hf:
            hf_section(res, args)
    if args.suite in ("tree", "all"):
        with tempfile.TemporaryDirectory() as tmp:
            head_dir = write_dummy_eagle3_head(get_preset(args.preset), Path(tmp) / "eagle3", draft_vocab_size=32000)
            tree_section(res, args, bw, head_dir)
    if args.suite in ("prefix", "all"):
        with tempfile.TemporaryDirectory() as tmp:
            head_dir = write_dummy_eagle3_head(get_preset(args.preset), Path(tmp) / "eagle3", draft_vocab_size=32000)
            prefix_section(res, args, head_dir)
    if args.suite in ("moe", "all"):
        moe_section(res, args, bw)
    chunked = ""
    if args.suite == "chunked":
        with tempfile.TemporaryDirectory() as tmp:
            head_dir = write_dummy_eagle3_head(get_preset(args.preset), Path(tmp) / "eagle3", draft_vocab_size=32000)
            chunked = chunked_section(res, args, head_dir)
    from specbench.perf.gpu_table import render

    table = render(res.data) + (f"\n\n{chunked}\n" if chunked else "")
    (res.out / "bench.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
