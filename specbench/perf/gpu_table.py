"""scripts/bench_gpu.py's JSON as the BENCHMARKS.md tables (missing sections are skipped)."""

from __future__ import annotations

from specbench.perf.moe_table import render_moe
from specbench.perf.prefix_perf import render_prefix
from specbench.perf.tree_table import render_tree


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _decode_table(rows: list[dict]) -> list[str]:
    lines = [_row(["run", "conc", "graphs", "step ms", "target ms", "draft ms", "floor ms", "% of floor",
                   "tok/step/req", "decode tok/s", "end-to-end tok/s"]),
             _row(["---"] * 11)]
    for r in rows:
        lines.append(_row([r["label"], r["concurrency"], "on" if r["is_graphed"] else "off", f"{r['step_ms']:.2f}",
                           f"{r['target_ms']:.2f}", f"{r['draft_ms']:.2f}", f"{r['floor_ms']:.2f}",
                           f"{r['pct_of_floor']:.1f}%", f"{r['tokens_per_step']:.2f}", f"{r['decode_tok_s']:.1f}",
                           f"{r['end_to_end_tok_s']:.1f}"]))
    return lines


def render(data: dict) -> str:
    s = data["sections"]
    versions = "".join(f", {name} {data[name]}" for name in ("triton", "transformers") if data.get(name))
    date = f"{data['date']}; " if data.get("date") else ""
    out = [(f"{date}Device: **{data['device']}** (torch {data['torch']}, CUDA {data['cuda']}{versions}); copy "
            f"bandwidth {s.get('copy_bandwidth_gbps', 0):.0f} GB/s (read + write).")]
    if "engine_build" in s:
        b = s["engine_build"]
        out.append(f"Target weights {b['weights_gb']:.2f} GB, EAGLE-3 head {b['draft_weights_gb']:.2f} GB; KV pool: "
                   f"{b['kv_pool']}; CUDA graphs {b['cuda_graphs']} ({b['num_target_graphs']} target graphs, "
                   f"engine built and captured in {b['seconds']:.0f} s); peak GPU memory "
                   f"{s.get('peak_gpu_mem_gb_engine', 0):.1f} GB.")
    decode = [v for k, v in s.items() if k.startswith(("plain_", "eagle3_"))]
    if decode:
        out += ["", *_decode_table(decode)]
    targets = []
    for conc, goal in ((1, 90), (16, 85), (64, 85)):  # issue 16's goals
        row, before = s.get(f"plain_c{conc}"), s.get(f"plain_sync_c{conc}")
        if row:
            was = f" (one step at a time: {before['pct_of_floor']:.1f}%)" if before else ""
            targets.append((f"plain decode, concurrency {conc}: % of floor", f"{row['pct_of_floor']:.1f}%{was}",
                            f">= {goal}%"))
    for conc, goal in ((1, 2.4), (16, 2.0)):
        plain, eagle = s.get(f"plain_c{conc}"), s.get(f"eagle3_c{conc}")
        before, plain_before = s.get(f"eagle3_sync_c{conc}"), s.get(f"plain_sync_c{conc}")
        if plain and eagle:
            was = (f"; one step / round at a time: {before['decode_tok_s'] / plain_before['decode_tok_s']:.2f}x"
                   if before and plain_before else "")
            targets.append((f"EAGLE-3 synthetic 0.73/0.52/0.35, k=3 / plain decode tok/s, conc {conc}",
                            f"{eagle['decode_tok_s'] / plain['decode_tok_s']:.2f}x "
                            f"(end to end {eagle['end_to_end_tok_s'] / plain['end_to_end_tok_s']:.2f}x{was})",
                            f">= {goal}x"))
    plain1, eagle1 = s.get("plain_c1"), s.get("eagle3_c1")
    if plain1 and eagle1:
        targets.append(("verify (4 query tokens) / decode (1 token) target time, conc 1",
                        f"{eagle1['target_ms'] / plain1['target_ms']:.3f}x", "<= 1.15x"))
    if targets:
        out += ["", _row(["target", "measured", "goal"]), _row(["---"] * 3)] + [_row(t) for t in targets]
    hf = s.get("hf_dynamic")
    if hf:
        out += ["", _row(["HF transformers generate", "batch", "HF tok/s", "specbench plain tok/s (e2e)",
                          "specbench / HF"]), _row(["---"] * 5)]
        for section in ("hf_dynamic", "hf_static_compiled"):
            for r in s.get(section, []):
                ours = s.get(f"plain_c{r['batch_size']}")
                ratio = f"{ours['end_to_end_tok_s'] / r['output_tokens_per_s']:.2f}x" if ours else "-"
                name = r["cache"] + (f" + compile (compile {r['compile_s']:.0f} s)" if r["is_compiled"] else "")
                out.append(_row([name, r["batch_size"], f"{r['output_tokens_per_s']:.1f}",
                                 f"{ours['end_to_end_tok_s']:.1f}" if ours else "-", ratio]))
    attn = {k.removeprefix("attention_"): v for k, v in s.items() if k.startswith("attention_")}
    if attn:
        out += ["", _row(["attention backend (eager engine)", "conc", "step ms", "target ms", "decode tok/s"]),
                _row(["---"] * 5)]
        for name, v in attn.items():
            for key, r in v.items():
                if key.startswith("c"):
                    out.append(_row([f"{name} (resolved: {v['resolved']})", r["concurrency"], f"{r['step_ms']:.2f}",
                                     f"{r['target_ms']:.2f}", f"{r['decode_tok_s']:.1f}"]))
    out += render_tree(s)
    out += render_prefix(s)
    moe = render_moe(s, hf_output_len=s.get("config", {}).get("moe_hf_output_len"))
    return "\n".join(out) + "\n" + moe
