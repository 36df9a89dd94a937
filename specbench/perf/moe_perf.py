"""scripts/bench_gpu.py's `moe` suite: MoE targets at real shapes (dummy weights) against the floor of the bytes each
step actually reads (specbench/perf/moe_floor.py), verify against decode, an EAGLE-3-shaped head with synthetic
acceptance, and HF transformers generate on the same shapes.

Per target, one engine (EAGLE-3 head loaded; plain rows run at k = 0):
- plain decoding at each concurrency: the timed run (measure_decode: CUDA graphs, overlapped steps), then the
  instrumented eager pass (moe_routing_probe.py) that counts the distinct experts of each layer's decode steps;
- EAGLE-3 synthetic at k = 3 for concurrencies 1 and 16: its target forward is the verify of k + 1 tokens per
  request; the same probe counts the experts a verify wakes;
- then, the engine freed, HF transformers generate (static cache, greedy) at the same batch sizes.
Each row is written to the results as soon as it is measured; a target that fails leaves an error row and the next
target still runs.
"""

from __future__ import annotations

import gc
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from specbench.perf.gpu_perf import DecodeRow, measure_decode, weight_bytes
from specbench.perf.moe_floor import ModelBytes, StepBytes, mean_step_bytes, model_bytes
from specbench.perf.moe_routing_probe import ExpertCounts, probe_active_experts
from specbench.perf.moe_targets import MoeBenchTarget, resolve_target

VERIFY_STEPS = 3  # k: a verify forward takes k + 1 tokens per request
VERIFY_CONCURRENCIES = (1, 16)


@dataclass(frozen=True)
class MoeRun:
    """What the suite measures with, one value per run."""

    concurrency: tuple[int, ...]
    prompt_len: int
    output_len: int
    kv_cache_gb: float | None
    max_model_len: int
    synthetic_acceptance: tuple[float, ...]
    hf_output_len: int  # HF generate's output tokens (its steps are slow: fewer than the engine's)
    is_hf_skipped: bool
    device: str = "cuda"
    dtype: str = "bf16"
    num_kv_blocks: int | None = None  # tests: an exact pool instead of kv_cache_gb
    probe_output_len: int = 32


@dataclass(frozen=True)
class MoeRow:
    target: str
    label: str  # "plain" | "eagle3 synthetic"
    concurrency: int
    num_steps: int  # k (0: plain decoding)
    is_graphed: bool
    step_ms: float  # median decode step, wall
    target_ms: float  # median target forward: decode of 1, or verify of k + 1 tokens per request
    draft_ms: float
    tokens_per_step: float  # per request
    decode_tok_s: float
    end_to_end_tok_s: float
    experts: dict  # ExpertCounts.to_dict() of this step kind; {} if the probe saw no such step
    bytes: dict  # StepBytes.to_dict() of the target forward
    floor_ms: float  # the target forward's bytes / copy bandwidth
    pct_of_floor: float  # 100 * floor_ms / step_ms (the whole step, as the dense rows)
    target_pct_of_floor: float  # 100 * floor_ms / target_ms (the target forward alone)

    def to_dict(self) -> dict:
        return asdict(self)


def make_row(target: str, row: DecodeRow, counts: ExpertCounts | None, step: StepBytes,
             bandwidth_gbps: float) -> MoeRow:
    floor_ms = step.floor_ms(bandwidth_gbps)
    return MoeRow(
        target=target, label=row.label, concurrency=row.concurrency, num_steps=row.num_steps,
        is_graphed=row.is_graphed, step_ms=row.step_ms, target_ms=row.target_ms, draft_ms=row.draft_ms,
        tokens_per_step=row.tokens_per_step, decode_tok_s=row.decode_tok_s, end_to_end_tok_s=row.end_to_end_tok_s,
        experts=counts.to_dict() if counts is not None else {}, bytes=step.to_dict(), floor_ms=floor_ms,
        pct_of_floor=100 * floor_ms / row.step_ms, target_pct_of_floor=100 * floor_ms / row.target_ms,
    )


def _step_bytes(mb: ModelBytes, counts: ExpertCounts | None, *, num_reqs: int, tokens_per_req: int,
                run: MoeRun) -> StepBytes:
    # No count (the probe saw no step of this size): every token's k experts distinct, the most a step can wake.
    if counts is not None:
        active = list(counts.active_per_layer)
    else:
        active = [float(num_reqs * tokens_per_req)] * len(mb.expert_bytes)
    return mean_step_bytes(mb, num_reqs=num_reqs, tokens_per_req=tokens_per_req, num_active_experts=active,
                           prompt_len=run.prompt_len, output_len=run.output_len)


def _repeats(concurrency: int) -> int:
    return max(1, 4 // concurrency)  # as the dense rows: more batches at low concurrency


def engine_rows(put, target: MoeBenchTarget, run: MoeRun, bandwidth_gbps: float, head_dir: Path) -> None:
    from specbench import LLM

    t0 = time.perf_counter()
    llm = LLM(target.preset, load_format="dummy", dtype=run.dtype, device=run.device, method="eagle3",
              draft=str(head_dir), max_num_steps=VERIFY_STEPS, synthetic_acceptance=run.synthetic_acceptance,
              kv_cache_gb=run.kv_cache_gb, num_kv_blocks=run.num_kv_blocks, max_concurrency=max(run.concurrency),
              max_model_len=run.max_model_len)
    engine = llm.engine
    model = engine.runner.model
    mb = model_bytes(model)
    moe = model.config.moe
    put("build", {"seconds": time.perf_counter() - t0, "preset": target.preset, "note": target.note,
                  "weights_gb": weight_bytes(model) / 1e9, "dense_gb": mb.dense_bytes / 1e9,
                  "expert_mb": mb.expert_bytes[0] / 1e6 if mb.expert_bytes else 0.0,
                  "num_layers": model.config.num_hidden_layers, "num_moe_layers": len(mb.expert_bytes),
                  "num_experts": moe.num_experts, "top_k": moe.num_experts_per_tok,
                  "windows": sorted({w for w in mb.windows if w is not None}),
                  "cuda_graphs": engine.parts.cuda_graphs, "draft_weights_gb": weight_bytes(engine.proposer.head) / 1e9})
    common = {"prompt_len": run.prompt_len, "output_len": run.output_len, "bandwidth_gbps": bandwidth_gbps}
    for conc in run.concurrency:
        row = measure_decode(llm, label="plain", concurrency=conc, num_steps=0, repeats=_repeats(conc), **common)
        counts = probe_active_experts(llm, concurrency=conc, num_steps=0, prompt_len=run.prompt_len,
                                      num_output_tokens=run.probe_output_len)
        step = _step_bytes(mb, counts, num_reqs=conc, tokens_per_req=1, run=run)
        put(f"plain_c{conc}", make_row(target.name, row, counts, step, bandwidth_gbps).to_dict())
    for conc in VERIFY_CONCURRENCIES:
        if conc not in run.concurrency:
            continue
        row = measure_decode(llm, label="eagle3 synthetic", concurrency=conc, num_steps=VERIFY_STEPS,
                             repeats=_repeats(conc), **common)
        counts = probe_active_experts(llm, concurrency=conc, num_steps=VERIFY_STEPS, prompt_len=run.prompt_len,
                                      num_output_tokens=run.probe_output_len)
        step = _step_bytes(mb, counts, num_reqs=conc, tokens_per_req=VERIFY_STEPS + 1, run=run)
        put(f"eagle3_c{conc}", make_row(target.name, row, counts, step, bandwidth_gbps).to_dict())
    if run.device == "cuda":
        put("peak_gpu_mem_gb", torch.cuda.max_memory_allocated() / 1e9)


def hf_rows(put, target: MoeBenchTarget, run: MoeRun) -> None:
    from specbench.perf.hf_baseline import run_hf_baseline
    from specbench.models.loader import parse_dtype

    out = run_hf_baseline(target.config, batch_sizes=list(run.concurrency), prompt_len=run.prompt_len,
                          output_len=run.hf_output_len, cache="static", compile=False, device=run.device,
                          dtype=parse_dtype(run.dtype) or torch.bfloat16, model_type=target.hf_model_type)
    put("hf_static", [asdict(r) for r in out])


def _free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def moe_suite(put, target_names: list[str], run: MoeRun, bandwidth_gbps: float, *, num_layers: int | None,
              head_dir_for) -> None:
    """`put(section, value)` records a result; sections are named `moe:<target>:<row>`. `head_dir_for(config)`
    writes a dummy EAGLE-3 head for a target config and returns its directory."""
    for name in target_names:
        def put_row(row: str, value, name=name) -> None:
            put(f"moe:{name}:{row}", value)

        is_failed = False
        try:
            target = resolve_target(name, num_layers)
            put_row("target", {"preset": target.preset, "hf_model_type": target.hf_model_type, "note": target.note})
            engine_rows(put_row, target, run, bandwidth_gbps, head_dir_for(target.config))
        except Exception as err:  # noqa: BLE001 - one target's failure must not lose the others' rows
            put_row("error", f"engine: {err!r}\n{traceback.format_exc()}")
            is_failed = True
        _free(run.device)  # after the except block: its traceback held the failed engine's frames
        if is_failed or run.is_hf_skipped:
            continue
        try:
            hf_rows(put_row, target, run)
        except Exception as err:  # noqa: BLE001 - the engine rows are kept
            put_row("hf_error", f"{err!r}\n{traceback.format_exc()}")
        _free(run.device)
