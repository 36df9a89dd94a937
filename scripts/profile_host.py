"""Where the host's time goes in the step loop, at real shapes on a GPU: cProfile over decode steps.

    python scripts/profile_host.py --cases 0:1,0:64,3:1,3:16 [--no-async-scheduling]
    python scripts/profile_host.py --cases 5:1,5:16 --eagle-topk 4 --num-draft-tokens 8   # tree rounds
    python scripts/profile_host.py --cases 3:64 --count-kernels [--enforce-eager]   # the work, to compare two trees

Each case is k:concurrency. Prints, per case, the decode steps' wall time against their CUDA-event target and
draft time (what the host adds), then the functions with the most own time per step. `--count-kernels` first
traces 5 steps and counts their CUDA kernels and copies by name: run from two trees' roots on one warm GPU, the same
function-call and kernel counts with the same target and draft ms say the trees do the same work, whatever their
(host-bound) step ms do.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import os
import pstats
import statistics
import tempfile
from pathlib import Path

import torch

from specbench import LLM, SamplingParams
from specbench.perf.gpu_perf import random_prompts
from specbench.models.presets import get_preset
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head

SYNTHETIC = (0.73, 0.52, 0.35)
TREE_SYNTHETIC = (0.8, 0.64, 0.512, 0.4096, 0.32768)  # bench_gpu.py --suite tree's top-4/8 k=5 rates


def profile_case(llm, num_steps: int, concurrency: int, args) -> None:
    engine = llm.engine
    engine.set_num_steps(num_steps)
    engine.set_async_scheduling(not args.no_async_scheduling)
    if args.eagle_topk > 1:
        engine.set_draft_shape(DraftShape(args.eagle_topk, args.num_draft_tokens))
    vocab = engine.runner.model.config.vocab_size
    params = SamplingParams(max_tokens=args.output_len, ignore_eos=True)
    llm.generate(random_prompts(vocab, concurrency, args.prompt_len, seed=1), SamplingParams(max_tokens=16,
                                                                                            ignore_eos=True))
    for prompt in random_prompts(vocab, concurrency, args.prompt_len, seed=2):
        engine.add_request(prompt, params)
    while not engine.scheduler.running or engine.scheduler.waiting:  # past the prefill
        engine.step()
    if args.count_kernels:  # before the profiled steps: the profiler's overhead stays out of their times
        count_kernels(engine, args.top)
    first = len(engine.step_stats)
    profiler = cProfile.Profile()
    torch.cuda.synchronize()
    profiler.enable()
    num_calls = 0
    while engine.has_unfinished():
        engine.step()
        num_calls += 1
    profiler.disable()
    steps = [s for s in engine.step_stats[first:] if s.phase == "decode" and s.num_reqs == concurrency]
    print(f"\n=== k={num_steps} concurrency={concurrency} async={engine.async_scheduling}: {len(steps)} steps, "
          f"{num_calls} step() calls")
    for name in ("step_ms", "target_ms", "draft_ms", "sample_ms"):
        print(f"  median {name}: {statistics.median(getattr(s, name) for s in steps):.3f}")
    stats = pstats.Stats(profiler)
    total = stats.total_tt
    print(f"  profiled host time per step() call: {1e3 * total / num_calls:.3f} ms (cProfile adds overhead)")
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats("specbench", args.top)
    if args.trace_steps:
        gpu_idle(llm, num_steps, concurrency, args)


def count_kernels(engine, top: int, num_steps: int = 5) -> None:
    """CUDA kernels and copies per step over `num_steps` traced steps, by name."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(num_steps):
            engine.step()
        torch.cuda.synchronize()
    names = collections.Counter(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"  CUDA kernels and copies per step: {sum(names.values()) / num_steps:.1f}")
    for name, count in names.most_common(top):
        print(f"   {count / num_steps:7.1f} {name[:90]}")


def gpu_idle(llm, num_steps: int, concurrency: int, args) -> None:
    """Device timeline of `trace_steps` decode steps: busy time (union of kernels and copies) against the wall
    span, and the longest idle gaps with the kernels on either side."""
    engine = llm.engine
    vocab = engine.runner.model.config.vocab_size
    # long enough that no request finishes while traced; they are aborted afterwards
    params = SamplingParams(max_tokens=8 * args.trace_steps + 64, ignore_eos=True)
    ids = [engine.add_request(prompt, params) for prompt in random_prompts(vocab, concurrency, args.prompt_len, seed=3)]
    for _ in range(6):  # prefill and the first rounds
        engine.step()
    torch.cuda.synchronize()
    path = Path(os.environ.get("OUT", "/tmp")) / f"trace_k{num_steps}_c{concurrency}.json"
    # device activity only: host-side tracing would slow the host and widen the very gaps measured here
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(args.trace_steps):
            engine.step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    while engine.has_unfinished():  # drain a launched step, then drop the requests
        for request_id in ids:
            engine.abort_request(request_id)
        engine.step()
    events = [e for e in json.loads(path.read_text())["traceEvents"]
              if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    events.sort(key=lambda e: e["ts"])
    busy, gaps, end, prev_name = 0.0, [], None, ""
    for e in events:
        start, stop = e["ts"], e["ts"] + e["dur"]
        if end is not None and start > end:
            gaps.append((start - end, prev_name, e["name"]))
        if end is None or stop > end:
            busy += stop - max(start, end if end is not None else start)
            end, prev_name = stop, e["name"]
    span = events[-1]["ts"] + events[-1]["dur"] - events[0]["ts"]
    print(f"  device timeline over {args.trace_steps} steps: span {span / 1e3:.2f} ms, busy {busy / 1e3:.2f} ms, "
          f"idle {100 * (1 - busy / span):.1f}%; per step: busy {busy / args.trace_steps / 1e3:.3f} ms, "
          f"idle {(span - busy) / args.trace_steps / 1e3:.3f} ms")
    for gap, before, after in sorted(gaps, reverse=True)[: args.top]:
        print(f"    gap {gap:8.1f} us  after {before[:60]!r}  before {after[:60]!r}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="llama-3.1-8b")
    ap.add_argument("--cases", default="0:1,0:64,3:1,3:16")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--kv-cache-gb", type=float, default=8.0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-async-scheduling", action="store_true")
    ap.add_argument("--eagle-topk", type=int, default=1, help="> 1: tree rounds of this top-k")
    ap.add_argument("--num-draft-tokens", type=int, default=None, help="the tree's node budget")
    ap.add_argument("--count-kernels", action="store_true", help="also count each case's CUDA kernels per step")
    ap.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    ap.add_argument("--trace-steps", type=int, default=0, help="also trace this many steps' device timeline")
    args = ap.parse_args()
    cases = [tuple(int(x) for x in c.split(":")) for c in args.cases.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        head = write_dummy_eagle3_head(get_preset(args.preset), Path(tmp) / "eagle3", draft_vocab_size=32000)
        llm = LLM(args.preset, load_format="dummy", dtype="bf16", device="cuda", method="eagle3", draft=str(head),
                  max_num_steps=max(k for k, _ in cases),
                  synthetic_acceptance=TREE_SYNTHETIC if args.eagle_topk > 1 else SYNTHETIC, kv_cache_gb=args.kv_cache_gb,
                  max_concurrency=max(c for _, c in cases), max_model_len=4096,
                  enforce_eager=args.enforce_eager)
        for num_steps, concurrency in cases:
            profile_case(llm, num_steps, concurrency, args)


if __name__ == "__main__":
    main()
