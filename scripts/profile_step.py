"""GPU kernel time per decode step, by kernel, for one engine configuration (dummy weights).

    python scripts/profile_step.py --concurrency 1 [--num-steps 3] [--steps 20] [--host]
    python scripts/profile_step.py --num-steps 5 --eagle-topk 4 --num-draft-tokens 8   # a tree round

Runs the steps eagerly under torch.profiler (kernels inside CUDA graphs are not attributed) and prints each
kernel's device time per step: the sum is what a graph replay can at best achieve, before launch gaps. Then the same
device time by the decoder layers' parts (mixer / attention / MLP or MoE / norms, by class: each part's forward is
one profiler range), the kernels per step, and, where the engine captured graphs, the median graphed step beside it.

    python scripts/profile_step.py --preset qwen3-next-80b-a3b --layers 12   # a hybrid target, cut as bench_hybrid
--host instead profiles the Python step loop (graphs on) with cProfile: where the host time per step goes.
--gaps (tree rounds, graphs on) times the host's pieces of a round by wall clock, without cProfile's overhead: above
all the time from the round's one read to the next draft graph's launch, during which the GPU has nothing queued.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from specbench import LLM, SamplingParams
from specbench.perf.gpu_perf import GraphsOff, random_prompts
from specbench.perf.hybrid_floor import cut_preset
from specbench.perf.moe_targets import resolve_target
from specbench.models.presets import get_preset
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head
from specbench.speculation.synthetic.tree import PUBLISHED_CHAIN_RATES, extend_rates


def profile_host(engine, prompts, args) -> None:
    import cProfile
    import pstats
    import time

    for p in prompts:
        engine.add_request(p, SamplingParams(max_tokens=args.steps * 4 + 40, ignore_eos=True))
    for _ in range(10):
        engine.step()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(args.steps):
        engine.step()
    profiler.disable()
    print(f"host wall per step (under cProfile): {(time.perf_counter() - start) / args.steps * 1e3:.3f} ms")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(args.top * 2)
    stats.sort_stats("tottime").print_stats(args.top)


def profile_gaps(engine, prompts, args) -> None:
    """Wall-clock host time per tree round of the pieces around the round's read (graphs on, no profiler)."""
    import time

    from specbench.engine import tree_round
    from specbench.speculation.drafters.eagle.tree_round_graph import EagleTreeRoundGraphs

    totals: dict[str, float] = defaultdict(float)
    read_at: list[float] = []

    def timed(name, fn):
        def run(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                totals[name] += time.perf_counter() - start
        return run

    host_round_init = tree_round._HostRound.__init__
    graph_run = EagleTreeRoundGraphs.run

    def on_read(self, rows):  # _HostRound is built right after the round's one read (.tolist())
        read_at.append(time.perf_counter())
        host_round_init(self, rows)

    def on_draft_launch(self, *a, **k):
        if read_at:
            totals["read -> next draft graph launch"] += time.perf_counter() - read_at.pop()
        return timed("draft graph loads + launch", graph_run)(self, *a, **k)

    tree_round._HostRound.__init__ = on_read
    EagleTreeRoundGraphs.run = on_draft_launch
    runner = engine.step_runner
    runner.proposer.propose_tree = timed("propose_tree (catch-up input + launch)", runner.proposer.propose_tree)
    runner.target_runner.verify = timed("verify launch", runner.target_runner.verify)
    engine.loop.committer.commit_all = timed("commit", engine.loop.committer.commit_all)
    engine.loop.scheduler.schedule = timed("schedule", engine.loop.scheduler.schedule)
    tree_round.build_uniform_tree_verify_input = timed("verify layout launch",
                                                       tree_round.build_uniform_tree_verify_input)
    tree_round.finish_tree_round = timed("finish_tree_round (launch + wait + bookkeeping)",
                                         tree_round.finish_tree_round)
    for p in prompts:
        engine.add_request(p, SamplingParams(max_tokens=args.steps * 4 + 40, ignore_eos=True))
    for _ in range(10):
        engine.step()
    totals.clear()
    start = time.perf_counter()
    for _ in range(args.steps):
        engine.step()
    step_ms = (time.perf_counter() - start) / args.steps * 1e3
    print(f"host wall per round: {step_ms:.3f} ms over {args.steps} rounds (concurrency {args.concurrency}, "
          f"k {args.num_steps}, top-{args.eagle_topk}/{args.num_draft_tokens}); per round, ms:")
    for name, total in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{total / args.steps * 1e3:8.3f}  {name}")


LAYER_PART = re.compile(r"layers\.\d+\.[^.]+$")  # a decoder layer's direct child: its mixer, MLP, norms


def part_ranges(model: torch.nn.Module) -> list:
    """Hooks that wrap each decoder layer part's forward in a profiler range named by its class, so the kernels it
    launches add up per part (torch.profiler gives a range the device time of the kernels launched inside it)."""
    handles = []
    for name, module in model.named_modules():
        if not LAYER_PART.search(name):
            continue
        label = f"part:{type(module).__name__}"

        def enter(mod, args, label=label):
            mod._profile_range = torch.autograd.profiler.record_function(label)
            mod._profile_range.__enter__()

        def leave(mod, args, output):
            mod._profile_range.__exit__(None, None, None)

        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    return handles


def graphed_step_ms(engine, prompts, steps: int) -> float | None:
    """Median decode step (ms) with the engine's captured graphs, None where it has none."""
    if engine.runner.graphs is None:
        return None
    first = len(engine.step_stats)
    for p in prompts:
        engine.add_request(p, SamplingParams(max_tokens=steps + 20, ignore_eos=True))
    while engine.has_unfinished():
        engine.step()
    decode = [s.step_ms for s in engine.step_stats[first:] if s.phase == "decode" and s.num_reqs == len(prompts)]
    return statistics.median(decode[5:] or decode)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="llama-3.1-8b")
    ap.add_argument("--moe-target", help="a MoE bench target instead of --preset (scripts/bench_gpu.py --suite moe's: "
                    "qwen3-30b-a3b, gpt-oss-20b), cut by --layers")
    ap.add_argument("--recurrent-kernels", default="auto", help="a hybrid target's: torch | triton | fla | auto")
    ap.add_argument("--layers", type=int, default=None,
                    help="a hybrid preset's or MoE target's first N layers (bench_hybrid's, bench_gpu's cut)")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--num-steps", type=int, default=0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--eagle-topk", type=int, default=1, help="with --num-draft-tokens: tree rounds of this shape")
    ap.add_argument("--num-draft-tokens", type=int, default=0)
    ap.add_argument("--host", action="store_true")
    ap.add_argument("--gaps", action="store_true", help="tree rounds: wall time of the host's pieces of a round")
    args = ap.parse_args()
    if args.gaps and args.eagle_topk < 2:
        ap.error("--gaps times tree rounds: give --eagle-topk > 1 with --num-draft-tokens and --num-steps")
    if args.num_draft_tokens and not args.num_steps:
        ap.error("--num-draft-tokens needs --num-steps (the tree's depth)")
    if args.eagle_topk > 1 and not args.num_draft_tokens:
        ap.error("--eagle-topk needs --num-draft-tokens (the tree's node budget)")
    tmp = tempfile.mkdtemp()
    if args.moe_target:
        target = resolve_target(args.moe_target, args.layers)
        preset, cut_note = target.preset, target.note
    else:
        preset, cut_note = cut_preset(args.preset, args.layers) if args.layers else (args.preset, "")
    kwargs = {}
    if args.num_steps:
        head = write_dummy_eagle3_head(get_preset(preset), Path(tmp) / "eagle3")
        kwargs = dict(method="eagle3", draft=str(head), max_num_steps=args.num_steps,
                      synthetic_acceptance=extend_rates(PUBLISHED_CHAIN_RATES, args.num_steps))
    llm = LLM(preset, load_format="dummy", dtype="bf16", device="cuda", kv_cache_gb=4,
              max_concurrency=args.concurrency, max_model_len=4096, recurrent_kernels=args.recurrent_kernels, **kwargs)
    prompts = random_prompts(llm.engine.runner.model.config.vocab_size, args.concurrency, 128)
    engine = llm.engine
    if args.num_draft_tokens:
        engine.set_draft_shape(DraftShape(args.eagle_topk, args.num_draft_tokens))
    if args.host:
        profile_host(engine, prompts, args)
        return
    if args.gaps:
        profile_gaps(engine, prompts, args)
        return
    handles = part_ranges(engine.runner.model)
    with GraphsOff(engine):
        for p in prompts:
            engine.add_request(p, SamplingParams(max_tokens=args.steps * 4 + 40, ignore_eos=True))
        for _ in range(10):  # prefill and warm-up
            engine.step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                engine.step()
            torch.cuda.synchronize()
        while engine.has_unfinished():
            engine.step()
    for handle in handles:
        handle.remove()
    # The part ranges show up twice: as CPU ranges whose device time is the sum of the kernels launched inside
    # them, and as GPU annotations spanning first to last kernel (gaps included): kernels are the CUDA events that
    # are not part annotations, and a part's time is its CPU range's.
    per_kernel: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    parts: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        is_part = event.name.startswith("part:")
        if event.device_type == torch.autograd.DeviceType.CUDA and not is_part:
            per_kernel[event.name][0] += event.device_time_total
            per_kernel[event.name][1] += 1
        elif event.device_type == torch.autograd.DeviceType.CPU and is_part:
            parts[event.name][0] += event.device_time_total
            parts[event.name][1] += 1
    total_us = sum(t for t, _ in per_kernel.values()) / args.steps
    num_kernels = sum(n for _, n in per_kernel.values()) / args.steps
    print(f"{torch.cuda.get_device_name()}, {preset}{' (' + cut_note + ')' if cut_note else ''}, "
          f"torch {torch.__version__}")
    print(f"device kernel time per step: {total_us / 1e3:.3f} ms, {num_kernels:.0f} kernels, over {args.steps} "
          f"eager steps (concurrency {args.concurrency}, k {args.num_steps}, "
          f"top-{args.eagle_topk}/{args.num_draft_tokens})")
    for name, (t, n) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{t / args.steps / 1e3:8.3f} ms  {n / args.steps:6.1f}/step  {t / n:7.1f} us each  {name[:100]}")
    print("device time by decoder-layer part (kernels launched inside each part's forward), per step:")
    for key, (t, n) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
        print(f"{t / args.steps / 1e3:8.3f} ms  {n / args.steps:6.1f} calls/step  {key[5:]}")
    rest = total_us - sum(t for t, _ in parts.values()) / args.steps
    print(f"{rest / 1e3:8.3f} ms  outside those parts (norms fused into the residual add, embedding, LM head, "
          "sampling, state commit)")
    graphed = graphed_step_ms(engine, prompts, args.steps)
    if graphed is not None:
        print(f"graphed decode step (median, same engine): {graphed:.3f} ms, against {total_us / 1e3:.3f} ms of "
              "kernels: the rest is gaps between them (launch, host)")


if __name__ == "__main__":
    main()
