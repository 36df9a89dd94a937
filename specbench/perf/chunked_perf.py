"""Chunked prefill under a mixed load (scripts/bench_gpu.py --suite chunked): `concurrency` requests are decoding
(plainly or speculating) when long prompts arrive; per setting, the running requests' TPOT and inter-emission
latency with chunked prefill off and on, and the long prompts' TTFT.

Without chunking a long prompt's whole prefill is one step: every running request waits for it (one inter-emission gap
the length of that prefill). With chunking each step carries the running requests' decode/verify tokens and at most
`budget` - (their tokens) prompt tokens, so their gaps stay near a decode step's and the long prompt's TTFT grows
instead. Both engines are the same engine switched between runs (LLMEngine.set_chunked_prefill), on the same prompts.

Every run starts from an empty prefix cache: the runs send the same prompts, and on an H100 the later runs found the
long prompts cached by the first (one mixed step where twelve were due, TTFT 42 ms for 3072 tokens). Before the
measured runs, a short pass of each setting (one long prompt) pays the one-off compiles and graph captures: the first
run's longest gap was 860 ms against 228 ms for the same prefill later.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, replace

from specbench.sampling_params import SamplingParams


@dataclass(frozen=True)
class MixedLoad:
    concurrency: int  # requests decoding when the long prompts arrive
    prompt_len: int  # the running requests' prompts
    output_len: int  # the running requests' outputs: long enough to decode past the long prompts' prefill
    long_prompt_len: int
    num_long: int  # long prompts, arriving together
    long_output_len: int = 16
    warmup_steps: int = 8  # engine steps of the running requests before the long prompts arrive


@dataclass(frozen=True)
class ChunkedRow:
    label: str
    is_chunked: bool
    budget: int  # max_num_batched_tokens: with chunking each step's token budget, without it the prefill limit
    concurrency: int
    num_steps: int  # k (0 = plain decoding)
    long_prompt_len: int
    num_long: int
    tpot_ms: float  # running requests: mean over them of (last emission - first) / (output tokens - 1)
    # Running requests' gaps between consecutive emissions from the long prompts' arrival on (ms)
    itl_p50_ms: float
    itl_p99_ms: float
    itl_max_ms: float  # the longest stall a running request saw
    ttft_mean_ms: float  # long prompts: first emission - arrival
    ttft_max_ms: float
    num_mixed_steps: int  # steps that carried chunks beside decode/verify rows

    def to_dict(self) -> dict:
        return asdict(self)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_mixed_load(llm, load: MixedLoad, *, is_chunked: bool, budget: int, num_steps: int,
                       label: str, seed: int = 0) -> ChunkedRow:
    """One run of `load` on `llm`'s engine (k = num_steps; chunking on at `budget` tokens per step, or off)."""
    engine = llm.engine
    engine.scheduler.block_manager.reset_prefix_cache()  # no run is served from another's prompts
    engine.set_num_steps(num_steps)
    # Off: the engine's own prefill limit (whole prompts, as many as fit it per step), as a run without chunking has.
    budget = budget if is_chunked else engine.config.max_num_batched_tokens
    engine.set_chunked_prefill(is_chunked, budget)
    rng = random.Random(seed)
    vocab = engine.vocab_size
    first_step = len(engine.step_stats)
    finished = {}

    def collect(outputs) -> None:
        finished.update((o.request_id, o) for o in outputs)

    running = [engine.add_request([rng.randrange(vocab) for _ in range(load.prompt_len)],
                                  SamplingParams(max_tokens=load.output_len, ignore_eos=True))
               for _ in range(load.concurrency)]
    for _ in range(load.warmup_steps):
        collect(engine.step())
    arrival = time.perf_counter()
    long = [engine.add_request([rng.randrange(vocab) for _ in range(load.long_prompt_len)],
                               SamplingParams(max_tokens=load.long_output_len, ignore_eos=True), arrival_time=arrival)
            for _ in range(load.num_long)]
    while engine.has_unfinished():
        collect(engine.step())
    tpots, gaps = [], []
    for request_id in running:
        stats = finished[request_id].stats
        times = stats.emission_times
        if stats.num_output_tokens > 1:
            tpots.append((times[-1] - times[0]) / (stats.num_output_tokens - 1))
        gaps += [b - a for a, b in zip(times, times[1:]) if b >= arrival]
    ttfts = [finished[r].stats.emission_times[0] - arrival for r in long]
    steps = engine.step_stats[first_step:]
    return ChunkedRow(label, is_chunked, budget, load.concurrency, num_steps, load.long_prompt_len, load.num_long,
                      1e3 * sum(tpots) / max(len(tpots), 1), 1e3 * _percentile(gaps, 0.5),
                      1e3 * _percentile(gaps, 0.99), 1e3 * max(gaps, default=0.0),
                      1e3 * sum(ttfts) / max(len(ttfts), 1), 1e3 * max(ttfts, default=0.0),
                      sum(s.phase == "mixed" for s in steps))


def chunked_suite(put, llm, loads: tuple[MixedLoad, ...], *, budget: int,
                  num_steps: tuple[int, ...] = (0, 3)) -> list[ChunkedRow]:
    """Per load and k: chunking off, then on; each row handed to `put(section, dict)` as it finishes."""
    for load in loads:  # discarded: compiles and CUDA-graph captures of every setting's shapes
        warm = replace(load, output_len=load.warmup_steps + 8, num_long=1, long_output_len=2)
        for k in num_steps:
            for is_chunked in (False, True):
                measure_mixed_load(llm, warm, is_chunked=is_chunked, budget=budget, num_steps=k, label="warm-up")
    rows = []
    for load in loads:
        for k in num_steps:
            for is_chunked in (False, True):
                what = "plain" if k == 0 else f"k={k}"
                label = f"{what}, chunked prefill {'on' if is_chunked else 'off'}"
                rows.append(measure_mixed_load(llm, load, is_chunked=is_chunked, budget=budget, num_steps=k,
                                               label=label))
                put(f"chunked_{'on' if is_chunked else 'off'}_k{k}_c{load.concurrency}", rows[-1].to_dict())
    return rows


def chunked_table(rows: list[ChunkedRow]) -> str:
    """Markdown: one line per run, off and on side by side per setting."""
    lines = ["| run | conc | long prompts | budget | TPOT ms | ITL p50 / p99 / max ms | TTFT mean / max ms | "
             "mixed steps |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.label} | {r.concurrency} | {r.num_long} x {r.long_prompt_len} | {r.budget} | "
                     f"{r.tpot_ms:.2f} | {r.itl_p50_ms:.2f} / {r.itl_p99_ms:.2f} / {r.itl_max_ms:.2f} | "
                     f"{r.ttft_mean_ms:.1f} / {r.ttft_max_ms:.1f} | {r.num_mixed_steps} |")
    return "\n".join(lines)
