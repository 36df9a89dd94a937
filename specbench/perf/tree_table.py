"""The tree rows of scripts/bench_gpu.py (perf/tree_perf.py) as a BENCHMARKS.md table, with issue 28's speed
targets met or missed (missing sections are skipped)."""

from __future__ import annotations

from specbench.perf.tree_perf import TARGETS

DEFINITION = ("Synthetic acceptance (forced, output NOT lossless). Chain: draft i accepted at the unconditional rate "
              "p_i. Tree: the rank-r child (among siblings, by the drafter's score) at depth d of a node on the true "
              "path is the true token with probability c_{d+1} * 0.5^r given that no lower-ranked sibling was "
              "(c = the chain's conditional rates p_i / p_{i-1}; speculation/synthetic/tree.py). The random-weight "
              "head drafts wide shallow trees, so 'tok/step measured' is the dummy's; 'tok/step calibrated' is the "
              "exact expected acceptance length of the tree a head following the law drafts (expected_tree), "
              "and 'speedup calibrated' = calibrated tok/step / step ms over plain decode tok/s: a round costs "
              "the same whatever its shape. Tree targets are judged on the calibrated speedup.")


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _verify_path(paths: list[str]) -> str:
    """How the row's target decode/verify forward ran (prefills are eager either way)."""
    if "spec.tree_round" in paths:
        return "graphed" if "graph.verify_tree" in paths else "eager"
    return "graphed" if {"graph.decode", "graph.verify"} & set(paths) else "eager"


def render_tree(s: dict) -> list[str]:
    rows = {k.removeprefix("tree_"): v for k, v in s.items() if k.startswith("tree_") and isinstance(v, dict)
            and "decode" in v}
    if not rows:
        return []
    out = ["", DEFINITION, "",
           _row(["run", "rates", "conc", "verify", "step ms", "target ms", "draft ms", "tok/step measured",
                 "tok/step calibrated", "speedup measured", "speedup calibrated"]), _row(["---"] * 11)]
    for key, r in rows.items():
        d = r["decode"]
        plain = rows.get(f"plain_c{d['concurrency']}")
        measured = calibrated = "-"
        if plain:
            plain_tok_s = plain["decode"]["decode_tok_s"]
            measured = f"{d['decode_tok_s'] / plain_tok_s:.2f}x"
            calibrated = f"{r['calibrated_tok_s'] / plain_tok_s:.2f}x"
        rates = ",".join(f"{x:g}" for x in r["rates"]) or "-"
        out.append(_row([d["label"], rates, d["concurrency"], _verify_path(r["paths"]), f"{d['step_ms']:.2f}",
                         f"{d['target_ms']:.2f}", f"{d['draft_ms']:.2f}", f"{d['tokens_per_step']:.2f}",
                         f"{r['calibrated_tokens_per_step']:.2f}", measured, calibrated]))
    targets = []
    for prefix, conc, goal in TARGETS:
        row, plain = rows.get(f"{prefix}_c{conc}"), rows.get(f"plain_c{conc}")
        if row and plain:
            speedup = row["calibrated_tok_s"] / plain["calibrated_tok_s"]
            targets.append(_row([f"{row['decode']['label']} / plain decode tok/s (calibrated), conc {conc}",
                                 f"{speedup:.2f}x", f">= {goal}x", "met" if speedup >= goal else "MISSED"]))
    if targets:
        out += ["", _row(["issue 28 target", "measured", "goal", ""]), _row(["---"] * 4), *targets]
    return out
