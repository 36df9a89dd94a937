"""Engine performance at real shapes (dummy weights) against the memory-bandwidth floor, for scripts/bench_gpu.py.

Floor per decode step = bytes that must be read (every weight once, plus the KV of every running request)
/ measured device-to-device copy bandwidth (bytes read + written). Step time is the median engine step of
the decode phase at full concurrency (StepStats.step_ms: wall time of one whole step, host work included).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import torch

from specbench.sampling_params import SamplingParams
from specbench.speculation.capabilities import CapturesDraftGraphs


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
    del src, dst
    return 2 * num_bytes * repeats / (start.elapsed_time(end) / 1e3) / 1e9


@dataclass(frozen=True)
class DecodeRow:
    label: str
    concurrency: int
    num_steps: int
    is_graphed: bool
    step_ms: float  # median decode step, wall
    target_ms: float  # median target forward (CUDA events)
    draft_ms: float  # median proposer time (CUDA events)
    sample_ms: float  # median verify/sample time (CUDA events)
    floor_ms: float  # bytes per step / copy bandwidth, for ONE target decode step
    tokens_per_step: float  # per request: accepted drafts + 1
    decode_tok_s: float  # concurrency * tokens_per_step / step time
    end_to_end_tok_s: float  # output tokens / wall time of the whole batch (prefill included)
    pct_of_floor: float  # 100 * floor_ms / step_ms (a speculative step reads the weights once too)

    def to_dict(self) -> dict:
        return asdict(self)


def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def random_prompts(vocab_size: int, num: int, length: int, seed: int = 0) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab_size, (length,), generator=gen).tolist() for _ in range(num)]


def measure_decode(llm, *, label: str, concurrency: int, num_steps: int, prompt_len: int, output_len: int,
                   bandwidth_gbps: float, repeats: int = 1, async_scheduling: bool = True) -> DecodeRow:
    """Run `concurrency` requests of prompt_len -> output_len tokens at k = num_steps, `repeats` times with fresh
    prompts (more rounds: synthetic acceptance averages closer to its rates); median decode step."""
    engine = llm.engine
    engine.set_num_steps(num_steps)
    engine.set_async_scheduling(async_scheduling)
    model = engine.runner.model
    warmup = random_prompts(model.config.vocab_size, concurrency, prompt_len, seed=concurrency)
    # Warm-up as long as the timed runs: a kernel specialisation first met past a shorter warm-up (attention at a
    # longer context) compiled inside the timed run. H100, session 22: a cold Triton cache halved one end-to-end
    # tok/s (839.7 -> 429.5, Qwen3-30B-A3B cut to 12 layers, 256 output tokens) while decode tok/s stayed equal.
    llm.generate(warmup, SamplingParams(max_tokens=output_len, ignore_eos=True))
    first = len(engine.step_stats)
    wall, num_output_tokens = 0.0, 0
    for repeat in range(repeats):
        prompts = random_prompts(model.config.vocab_size, concurrency, prompt_len, seed=1000 * repeat + concurrency)
        if engine.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        outs = llm.generate(prompts, SamplingParams(max_tokens=output_len, ignore_eos=True))
        wall += time.perf_counter() - start
        num_output_tokens += sum(len(o.output_token_ids) for o in outs)
    steps = [s for s in engine.step_stats[first:] if s.phase == "decode" and s.num_reqs == concurrency]
    step_ms = statistics.median(s.step_ms for s in steps)
    tokens_per_step = statistics.mean((s.num_accepted_tokens + s.num_reqs) / s.num_reqs for s in steps)
    kv_per_token = model.kv_cache_spec().bytes_per_block(1)
    avg_context = prompt_len + output_len / 2
    floor_ms = (weight_bytes(model) + concurrency * avg_context * kv_per_token) / (bandwidth_gbps * 1e9) * 1e3
    return DecodeRow(
        label=label,
        concurrency=concurrency,
        num_steps=num_steps,
        is_graphed=engine.runner.graphs is not None and engine.runner.graphs.num_replays > 0,
        step_ms=step_ms,
        target_ms=statistics.median(s.target_ms for s in steps),
        draft_ms=statistics.median(s.draft_ms for s in steps),
        sample_ms=statistics.median(s.sample_ms for s in steps),
        floor_ms=floor_ms,
        tokens_per_step=tokens_per_step,
        decode_tok_s=concurrency * tokens_per_step / (step_ms / 1e3),
        end_to_end_tok_s=num_output_tokens / wall,
        pct_of_floor=100 * floor_ms / step_ms,
    )


class GraphsOff:
    """Context manager: run an engine eagerly for a while (its captured graphs are kept for afterwards)."""

    def __init__(self, engine) -> None:
        self.engine = engine

    def __enter__(self):
        self._saved = self.engine.runner.graphs
        self.engine.runner.graphs = None
        if isinstance(self.engine.proposer, CapturesDraftGraphs):
            self.engine.proposer.pause_step_graphs(True)
        return self

    def __exit__(self, *exc) -> None:
        self.engine.runner.graphs = self._saved
        if isinstance(self.engine.proposer, CapturesDraftGraphs):
            self.engine.proposer.pause_step_graphs(False)
