"""What one EAGLE-3 round does, to compare two trees' work rather than their noisy host-bound timings: CUDA kernels
per step (a trace of 5 steps, counted by name), the median step/target/draft/sample ms, and cProfile's function calls
and top functions over the rest of the run (Llama-3.1-8B shapes, dummy bf16, synthetic acceptance, k=3).

    python scripts/profile_round_work.py graph 64     # CUDA graphs on, 64 requests
    python scripts/profile_round_work.py eager 1      # enforce_eager, one request

Run it from each tree's root on the same warm GPU machine: the same function-call and kernel counts with the same
target and draft ms say the trees do the same work, whatever their step ms do.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import statistics
import tempfile
from pathlib import Path

import torch

from specbench import LLM, SamplingParams
from specbench.bench.gpu_perf import random_prompts
from specbench.models.presets import get_preset
from specbench.speculation.eagle.dummy import write_dummy_eagle3_head

SYNTHETIC = (0.73, 0.52, 0.35)  # bench_gpu.py's EAGLE-3 chain rates


def profile(llm: LLM, concurrency: int, top: int) -> None:
    engine = llm.engine
    vocab = engine.runner.model.config.vocab_size
    params = SamplingParams(max_tokens=96, ignore_eos=True)
    for prompt in random_prompts(vocab, concurrency, 128, seed=2):
        engine.add_request(prompt, params)
    while not engine.scheduler.running or engine.scheduler.waiting:  # past the prefill
        engine.step()
    for _ in range(3):
        engine.step()
    torch.cuda.synchronize()
    first = len(engine.step_stats)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            engine.step()
        torch.cuda.synchronize()
    names = collections.Counter(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"== concurrency {concurrency}: CUDA kernels and copies per step {sum(names.values()) / 5:.1f}")
    for name, count in names.most_common(top):
        print(f"   {count / 5:7.1f} {name[:90]}")
    profiler = cProfile.Profile()
    profiler.enable()
    num_calls = 0
    while engine.has_unfinished():
        engine.step()
        num_calls += 1
    profiler.disable()
    steps = [s for s in engine.step_stats[first:] if s.phase == "decode" and s.num_reqs == concurrency]
    for field in ("step_ms", "target_ms", "draft_ms", "sample_ms"):
        print(f"  median {field}: {statistics.median(getattr(s, field) for s in steps):.3f}")
    stats = pstats.Stats(profiler)
    print(f"  host time per step() call {1e3 * stats.total_tt / num_calls:.3f} ms over {num_calls} calls")
    stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("graph", "eager"))
    ap.add_argument("concurrency", help="comma-separated, e.g. 1,64")
    ap.add_argument("--preset", default="llama-3.1-8b")
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args()
    concurrency = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        head = write_dummy_eagle3_head(get_preset(args.preset), Path(tmp) / "eagle3", draft_vocab_size=32000)
        llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", method="eagle3", draft=str(head),
                  max_num_steps=3, synthetic_acceptance=SYNTHETIC, kv_cache_gb=8.0, max_concurrency=max(concurrency),
                  max_model_len=4096, enforce_eager=args.mode == "eager")
        llm.engine.set_num_steps(3)
        llm.generate(random_prompts(llm.engine.runner.model.config.vocab_size, 2, 64, seed=1),
                     SamplingParams(max_tokens=16, ignore_eos=True))  # warm-up: compiles, first graphs
        for conc in concurrency:
            profile(llm, conc, args.top)


if __name__ == "__main__":
    main()
