"""Issue 45's hybrid-target rows in one command: a Qwen3-Next-shaped dummy target (cut to its first --layers layers to
fit one GPU), plain decoding against a bandwidth floor that counts the Gated DeltaNet state, verify against decode,
MTP and EAGLE-3 speedups at synthetic acceptance.

    python scripts/bench_hybrid.py --out results/bench_hybrid            # H100: qwen3-next-80b-a3b, first 12 layers
    python scripts/bench_hybrid.py --tiny --out /tmp/bench_hybrid_tiny   # CPU, a tiny random hybrid (the test's run)

Rows (one engine for plain + MTP, then one for EAGLE-3; on CUDA their decode and uniform verify steps replay CUDA
graphs, recurrent/graph_rows.py; then, with --eager-rows, the default on CUDA, one more MTP engine with
--enforce-eager, its rows keyed `mtp-eager:`, side by side with the graphed ones):
- plain c = each --concurrency: median decode step, tok/s, and the floor: specbench/perf/hybrid_floor.py's bytes
  (dense weights, the experts the step wakes as counted by the routing probe, the attention layers' K/V, each
  request's recurrent + conv state read and written in every Gated DeltaNet layer) / the measured copy bandwidth;
- verify / decode: the target forward of an MTP k = 3 round (4 tokens a request, c = 1) over a plain decode's;
- MTP k = 1, 2, 3 and EAGLE-3 k = 3 (dummy head) at c = 1, synthetic acceptance SYNTHETIC: tok/s over plain's.
Writes OUT/bench.json (rows as measured, a failed section's traceback) and OUT/bench.md (the table, also printed).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench import LLM  # noqa: E402
from specbench.errors import SpecbenchError  # noqa: E402
from specbench.models.presets import get_preset  # noqa: E402
from specbench.perf.gpu_perf import copy_bandwidth_gbps, measure_decode  # noqa: E402
from specbench.perf.hybrid_floor import (  # noqa: E402
    HybridStepBytes,
    cut_preset,
    expected_distinct_experts,
    state_bytes_per_step,
)
from specbench.perf.moe_floor import mean_step_bytes, model_bytes  # noqa: E402
from specbench.perf.moe_routing_probe import probe_active_experts  # noqa: E402
from specbench.recurrent.state_cache import state_shape  # noqa: E402
from specbench.speculation.drafters.eagle.dummy import write_dummy_eagle3_head  # noqa: E402

SYNTHETIC = (0.73, 0.52, 0.35)  # as scripts/bench_gpu.py: acceptance length 2.60 at k = 3
MAX_K = 3
TINY_PRESET = "tiny-qwen3-next"


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


class Out:
    """bench.json rewritten after every row (a time-out keeps what was measured)."""

    def __init__(self, path: Path, device_name: str, header: dict) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.data = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device_name,
                     "torch": torch.__version__, "cuda": torch.version.cuda, **header, "rows": {}, "errors": {}}

    def put(self, key: str, value) -> None:
        self.data["rows"][key] = value
        self._write()
        print(f"[{time.strftime('%H:%M:%S')}] {key}: {json.dumps(value, default=str)[:300]}", flush=True)

    def error(self, key: str) -> None:
        self.data["errors"][key] = traceback.format_exc()
        self._write()
        print(f"[{time.strftime('%H:%M:%S')}] {key} FAILED:\n{self.data['errors'][key]}", flush=True)

    def _write(self) -> None:
        (self.path / "bench.json").write_text(json.dumps(self.data, indent=2, default=str))


def cpu_copy_bandwidth_gbps(num_bytes: int = 64 << 20, repeats: int = 5) -> float:
    """The CPU run's stand-in for copy_bandwidth_gbps (bytes read + written per second)."""
    src = torch.empty(num_bytes, dtype=torch.uint8).random_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    start = time.perf_counter()
    for _ in range(repeats):
        dst.copy_(src)
    return 2 * num_bytes * repeats / (time.perf_counter() - start) / 1e9


class Floors:
    """One engine's per-step bytes: weights and K/V (moe_floor), woken experts (probe, else the uniform estimate),
    the Gated DeltaNet state."""

    def __init__(self, llm: LLM, args, bw: float) -> None:
        self.llm, self.args, self.bw = llm, args, bw
        model = llm.engine.runner.model
        self.mb = model_bytes(model)
        self.shape = state_shape(model)
        self.conv_dtype = model.dtype
        self.moe = model.config.moe

    def experts(self, num_reqs: int, k: int) -> tuple[list[float], str]:
        num_tokens = num_reqs * (k + 1)
        try:
            counts = probe_active_experts(self.llm, concurrency=num_reqs, num_steps=k, prompt_len=self.args.prompt_len,
                                          num_output_tokens=self.args.probe_len)
        except Exception:  # noqa: BLE001 - the estimate stands in; the row says which
            counts = None
        if counts is not None:
            return list(counts.active_per_layer), "routing probe"
        estimate = expected_distinct_experts(self.moe.num_experts, self.moe.num_experts_per_tok, num_tokens)
        return [estimate] * len(self.mb.expert_bytes), "uniform estimate"

    def step(self, num_reqs: int, k: int) -> dict:
        """Bytes and floor of one target forward of num_reqs requests of k + 1 tokens."""
        active, source = self.experts(num_reqs, k) if self.mb.expert_bytes else ([], "no MoE")
        weights_kv = mean_step_bytes(self.mb, num_reqs=num_reqs, tokens_per_req=k + 1, num_active_experts=active,
                                     prompt_len=self.args.prompt_len, output_len=self.args.output_len)
        step = HybridStepBytes(weights_kv, state_bytes_per_step(self.shape, self.conv_dtype, num_reqs))
        mean_active = sum(active) / len(active) if active else 0.0
        return {**step.to_dict(), "floor_ms": step.floor_ms(self.bw), "experts_per_layer": mean_active,
                "experts_source": source}


def decode_row(llm: LLM, floors: Floors, args, *, label: str, concurrency: int, k: int) -> dict:
    floor = floors.step(concurrency, k)
    row = measure_decode(llm, label=label, concurrency=concurrency, num_steps=k, prompt_len=args.prompt_len,
                         output_len=args.output_len, bandwidth_gbps=floors.bw, repeats=args.repeats)
    return {"label": label, "concurrency": concurrency, "k": k, "step_ms": row.step_ms, "target_ms": row.target_ms,
            "draft_ms": row.draft_ms, "tokens_per_step": row.tokens_per_step, "decode_tok_s": row.decode_tok_s,
            "end_to_end_tok_s": row.end_to_end_tok_s, "bytes": floor, "floor_ms": floor["floor_ms"],
            "pct_of_floor": 100 * floor["floor_ms"] / row.step_ms,
            "target_pct_of_floor": 100 * floor["floor_ms"] / row.target_ms}


def engine_kwargs(args) -> dict:
    return dict(load_format="dummy", dtype=args.dtype, device=args.device, max_num_steps=MAX_K,
                synthetic_acceptance=SYNTHETIC, max_concurrency=max(args.concurrency), max_model_len=args.max_model_len,
                kv_cache_gb=args.kv_cache_gb, num_kv_blocks=args.num_kv_blocks,
                recurrent_kernels=args.recurrent_kernels)


def free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


EAGER = "-eager"  # the suffix of the --enforce-eager section's row keys (mtp-eager:plain_c1, ...)


def rows_section(out: Out, args, preset: str, bw: float, method: str, head_dir: Path | None,
                 eager: bool = False) -> None:
    """One engine: plain rows (on the MTP engine: every --concurrency; on EAGLE-3's: c = 1, its own baseline), then
    the method's rows at c = 1 (k = 1..3 on the MTP engine, k = 3 on the others). `eager`: --enforce-eager, keys
    `<method>-eager:`, plain rows and k = 3 only (the graphs' comparison)."""
    section = method + (EAGER if eager else "")
    t0 = time.perf_counter()
    llm = LLM(preset, method=method, draft=str(head_dir) if head_dir else None, enforce_eager=eager,
              **engine_kwargs(args))
    out.put(f"{section}:build", {"seconds": time.perf_counter() - t0, "cuda_graphs": llm.engine.parts.cuda_graphs})
    floors = Floors(llm, args, bw)
    plain_concurrency = args.concurrency if method == "mtp" else [1]
    for conc in plain_concurrency:
        try:
            out.put(f"{section}:plain_c{conc}", decode_row(llm, floors, args, label="plain", concurrency=conc, k=0))
        except Exception:  # noqa: BLE001 - one row's failure keeps the others
            out.error(f"{section}:plain_c{conc}")
    ks = range(1, MAX_K + 1) if method == "mtp" and not eager else [MAX_K]
    for k in ks:
        try:
            out.put(f"{section}:k{k}_c1", decode_row(llm, floors, args, label=f"{method} synthetic", concurrency=1,
                                                     k=k))
        except Exception:  # noqa: BLE001
            out.error(f"{section}:k{k}_c1")
    del llm, floors
    free(args.device)


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def table(data: dict) -> str:
    rows, h = data["rows"], data
    lines = [f"{h['device']}, {h['date']}, torch {h['torch']}, dtype {h['dtype']}; target {h['preset']} dummy weights, "
             f"{h['cut']}; recurrent kernels {h.get('recurrent_kernels', 'torch')}; prompt {h['prompt_len']} -> {h['output_len']} tokens; copy bandwidth "
             f"{fmt(rows.get('copy_bandwidth_gbps'), '.0f')} GB/s; CUDA graphs: {graphs_note(rows)}; synthetic "
             f"acceptance {list(SYNTHETIC)}", "",
             "| row | step ms | target ms | tok/s | floor ms (weights + experts + KV + state GB) | % of floor "
             "| vs plain c=1 |", "| --- | --- | --- | --- | --- | --- | --- |"]
    plain = rows.get("mtp:plain_c1")
    for key, row in rows.items():
        if not isinstance(row, dict) or "step_ms" not in row:
            continue
        b = row["bytes"]
        section = key.split(":")[0]
        base = plain if section == "mtp" else rows.get(f"{section}:plain_c1")
        speedup = row["decode_tok_s"] / base["decode_tok_s"] if base and row["k"] else None
        lines.append(
            f"| {key} ({data['cut']}) | {row['step_ms']:.2f} | {row['target_ms']:.2f} | {row['decode_tok_s']:.1f} | "
            f"{row['floor_ms']:.3f} ({b['dense_gb'] + b['embedding_gb']:.3f} + {b['experts_gb']:.3f} + "
            f"{b['kv_gb']:.4f} + {b['state_gb']:.4f}) | {row['pct_of_floor']:.1f}% | "
            f"{fmt(speedup)}{'x' if speedup else ''} |")
    verify = rows.get("verify_over_decode")
    if verify:
        lines += ["", f"verify (k + 1 = 4 tokens, c = 1) / decode target forward ({data['cut']}): "
                      f"{verify['time_ratio']:.2f}x time for {verify['bytes_ratio']:.2f}x floor bytes"]
    pairs = [(key, rows[f"mtp{EAGER}:{key.split(':')[1]}"]) for key in rows
             if key.startswith("mtp:") and f"mtp{EAGER}:{key.split(':')[1]}" in rows and "step_ms" in rows[key]]
    if pairs:
        lines += ["", "CUDA graphs vs eager (step ms): " + "; ".join(
            f"{key.split(':')[1]} {rows[key]['step_ms']:.2f} vs {eager['step_ms']:.2f} "
            f"({eager['step_ms'] / rows[key]['step_ms']:.2f}x)" for key, eager in pairs if "step_ms" in eager)]
    experts = {k: (r["bytes"]["experts_per_layer"], r["bytes"]["experts_source"]) for k, r in rows.items()
               if isinstance(r, dict) and "bytes" in r}
    if experts:
        lines += ["", "experts woken per MoE layer per step: " + "; ".join(
            f"{k} {n:.1f} ({src})" for k, (n, src) in experts.items())]
    lines += [f"- FAILED {k}: {v.strip().splitlines()[-1]}" for k, v in data["errors"].items()]
    return "\n".join(lines) + "\n"


def graphs_note(rows: dict) -> str:
    """What the engines said of their CUDA graphs (EngineParts.cuda_graphs), per section."""
    notes = {key.split(":")[0]: row["cuda_graphs"] for key, row in rows.items()
             if key.endswith(":build") and isinstance(row, dict) and "cuda_graphs" in row}
    return "; ".join(f"{section} {note}" for section, note in notes.items()) or "-"


def run(args) -> dict:
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    preset, note = cut_preset(args.preset, args.layers)
    out = Out(Path(args.out), device_name, {"preset": args.preset, "cut": note, "dtype": args.dtype,
                                            "recurrent_kernels": args.recurrent_kernels,
                                            "prompt_len": args.prompt_len, "output_len": args.output_len,
                                            "config": vars(args)})
    bw = copy_bandwidth_gbps() if args.device == "cuda" else cpu_copy_bandwidth_gbps()
    out.put("copy_bandwidth_gbps", bw)
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods:
            try:
                config = get_preset(preset)
                head_dir = None if method == "mtp" else write_dummy_eagle3_head(
                    config, Path(tmp) / "eagle3", draft_vocab_size=min(32000, config.vocab_size))
                rows_section(out, args, preset, bw, method, head_dir)
            except Exception:  # noqa: BLE001 - one section's failure keeps the other's rows
                out.error(f"{method}:section")
            free(args.device)  # outside the handler: its traceback's frames no longer hold the engine
            (out.path / "bench.md").write_text(table(out.data))  # a time-out keeps the table so far
        if args.eager_rows and "mtp" in args.methods:  # the same rows without graphs, after the graphed ones
            try:
                rows_section(out, args, preset, bw, "mtp", None, eager=True)
            except Exception:  # noqa: BLE001
                out.error(f"mtp{EAGER}:section")
            free(args.device)
            (out.path / "bench.md").write_text(table(out.data))
    rows = out.data["rows"]
    plain, verify = rows.get("mtp:plain_c1"), rows.get(f"mtp:k{MAX_K}_c1")
    if plain and verify:
        out.put("verify_over_decode", {"time_ratio": verify["target_ms"] / plain["target_ms"],
                                       "bytes_ratio": verify["floor_ms"] / plain["floor_ms"]})
    md = table(out.data)
    (out.path / "bench.md").write_text(md)
    print(md, flush=True)
    return out.data


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen3-next-80b-a3b")
    ap.add_argument("--layers", type=int, default=12,
                    help="cut the target to its first N layers (a multiple of 4); 0: all (80B bf16 fits no 80 GB GPU)")
    ap.add_argument("--concurrency", default="1,16", type=ints, help="plain decode rows")
    ap.add_argument("--methods", default="mtp,eagle3", type=lambda s: [m for m in s.split(",") if m])
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--probe-len", type=int, default=8, help="output tokens of the expert-count probe")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-model-len", type=int, default=1024)
    ap.add_argument("--kv-cache-gb", type=float, default=4.0)
    ap.add_argument("--num-kv-blocks", type=int, default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--recurrent-kernels", default="auto", help="EngineConfig.recurrent_kernels: torch | triton | "
                    "fla | auto")
    ap.add_argument("--out", default="results/bench_hybrid")
    ap.add_argument("--eager-rows", action=argparse.BooleanOptionalAction, default=None,
                    help="one more MTP engine with --enforce-eager (rows mtp-eager:*, beside the graphed ones); "
                         "default: on for --device cuda")
    ap.add_argument("--tiny", action="store_true",
                    help=f"CPU, {TINY_PRESET} (4 layers), short runs: the whole flow in seconds (the test's run)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.preset, args.layers, args.device, args.dtype = TINY_PRESET, None, "cpu", "fp32"
        args.prompt_len, args.output_len, args.probe_len, args.max_model_len = 16, 8, 4, 128
        args.kv_cache_gb, args.num_kv_blocks = None, 128
    if args.layers == 0:
        args.layers = None
    if args.eager_rows is None:
        args.eager_rows = args.device == "cuda"  # on CPU every engine runs eagerly: nothing to compare
    bad = [m for m in args.methods if m not in ("mtp", "eagle3")]
    if bad:
        ap.error(f"unknown method {bad[0]!r}; supported: mtp, eagle3")
    if not args.methods:  # each method's section holds the plain rows too: none would time nothing
        ap.error("--methods needs at least one of mtp, eagle3 (each section times the plain rows first)")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda needs a CUDA device (or --tiny for the CPU run)")
    return args


def main(argv: list[str] | None = None) -> dict:
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
