"""The `moe` suite's sections of scripts/bench_gpu.py's JSON (`moe:<target>:<row>`) as BENCHMARKS.md tables."""

from __future__ import annotations

GOALS = {1: 80.0, 16: 75.0}  # issue 27: plain MoE decode, % of the floor of the bytes actually read


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def moe_sections(sections: dict) -> dict[str, dict]:
    """{target: {row: value}} from the flat `moe:<target>:<row>` sections, targets in run order."""
    out: dict[str, dict] = {}
    for key, value in sections.items():
        if key.startswith("moe:"):
            _, target, row = key.split(":", 2)
            out.setdefault(target, {})[row] = value
    return out


def _experts(row: dict) -> str:
    e = row["experts"]
    return f"{e['mean_active']:.1f} / {e['num_experts']}" if e else "n/a"


def _hf_rate(rows: dict, concurrency: int) -> dict | None:
    return next((r for r in rows.get("hf_static", []) if r["batch_size"] == concurrency), None)


def _describe(target: str, rows: dict) -> list[str]:
    lines = []
    b = rows.get("build")
    if b:
        windows = f", sliding windows {b['windows']}" if b["windows"] else ""
        lines.append(f"- **{target}** (preset `{b['preset']}`{'; ' + b['note'] if b['note'] else ''}): "
                     f"{b['num_layers']} layers ({b['num_moe_layers']} MoE, {b['num_experts']} experts, top "
                     f"{b['top_k']}, {b['expert_mb']:.1f} MB an expert{windows}); weights {b['weights_gb']:.2f} GB, "
                     f"of which read whole by every step {b['dense_gb']:.2f} GB; EAGLE-3 head "
                     f"{b['draft_weights_gb']:.2f} GB; built in {b['seconds']:.0f} s; peak GPU memory "
                     f"{rows.get('peak_gpu_mem_gb', 0):.1f} GB.")
    for key in ("error", "hf_error"):
        if key in rows:
            lines.append(f"- **{target}** {key.replace('_', ' ')}: `{rows[key].splitlines()[0]}`")
    return lines


def render_moe(sections: dict, hf_output_len: int | None = None) -> str:
    targets = moe_sections(sections)
    if not targets:
        return ""
    out = ["", ("MoE targets (dummy bf16; floor = bytes the step reads: dense weights, the embedding rows of its "
                "tokens, the distinct experts its tokens were routed to, K/V within each layer's window; over the "
                "copy bandwidth above). Experts per layer are counted from the router's choices in an instrumented "
                "eager pass (forward pre-hooks re-running each layer's router) over the first output tokens of the "
                "same prompts; the timed runs replay CUDA graphs, where nothing is counted."), ""]
    for target, rows in targets.items():
        out += _describe(target, rows)
    hf_note = f" (HF: static cache, greedy, {hf_output_len} output tokens)" if hf_output_len else ""
    out += ["", _row(["target", "run", "conc", "graphs", "step ms", "target ms", "experts / layer", "floor ms",
                      "% of floor", "decode tok/s", "end-to-end tok/s", f"HF generate tok/s{hf_note}",
                      "specbench e2e / HF"]), _row(["---"] * 13)]
    for target, rows in targets.items():
        for key, r in rows.items():
            if not key.startswith(("plain_c", "eagle3_c")):
                continue
            hf = _hf_rate(rows, r["concurrency"]) if r["num_steps"] == 0 else None
            label = r["label"] + (f", k={r['num_steps']}" if r["num_steps"] else "")
            out.append(_row([target, label, r["concurrency"], "on" if r["is_graphed"] else "off",
                             f"{r['step_ms']:.2f}", f"{r['target_ms']:.2f}", _experts(r), f"{r['floor_ms']:.2f}",
                             f"{r['pct_of_floor']:.1f}%", f"{r['decode_tok_s']:.1f}", f"{r['end_to_end_tok_s']:.1f}",
                             f"{hf['output_tokens_per_s']:.1f}" if hf else "-",
                             f"{r['end_to_end_tok_s'] / hf['output_tokens_per_s']:.2f}x" if hf else "-"]))
    verify = []
    for target, rows in targets.items():
        for key, v in rows.items():
            d = rows.get(key.replace("eagle3_", "plain_")) if key.startswith("eagle3_c") else None
            if d is None:
                continue
            verify.append(_row([target, v["concurrency"], _experts(d), _experts(v), f"{d['target_ms']:.2f}",
                                f"{v['target_ms']:.2f}", f"{v['target_ms'] / d['target_ms']:.2f}x",
                                f"{v['bytes']['total_gb'] / d['bytes']['total_gb']:.2f}x",
                                f"{d['target_pct_of_floor']:.1f}% / {v['target_pct_of_floor']:.1f}%",
                                f"{v['tokens_per_step']:.2f}", f"{v['decode_tok_s'] / d['decode_tok_s']:.2f}x"]))
    if verify:
        out += ["", _row(["target", "conc", "decode: experts / layer", "verify (k+1 = 4 tokens): experts / layer",
                          "decode target ms", "verify target ms", "verify / decode time", "verify / decode bytes",
                          "target fwd % of its floor (decode / verify)", "EAGLE-3 tok/step/req",
                          "EAGLE-3 / plain decode tok/s"]), _row(["---"] * 11)] + verify
    goals = []
    for target, rows in targets.items():
        for conc, goal in GOALS.items():
            r = rows.get(f"plain_c{conc}")
            if r:
                met = "met" if r["pct_of_floor"] >= goal else "missed"
                goals.append(_row([f"{target} plain c={conc}, % of floor", f"{r['pct_of_floor']:.1f}%",
                                   f">= {goal:.0f}%", met]))
    if goals:
        out += ["", _row(["target", "measured", "goal", "met?"]), _row(["---"] * 4)] + goals
    return "\n".join(out) + "\n"
