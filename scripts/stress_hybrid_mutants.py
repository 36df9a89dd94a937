"""Corruption per condition of `specbench stress --conditions hybrid` against `specbench serve` on a tiny random
Qwen3-Next (n-gram k = 3, prefix caching with state snapshots, fp32 CPU), clean and with each hybrid-state mutant
served (`--inject`), against a clean plain twin: one markdown table (rows: served engine; cells: corrupt / requests,
the headline's smallest failing conditions last).

    python scripts/stress_hybrid_mutants.py [--num-requests 8] [--max-tokens 16]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from specbench.config import EngineConfig
    from specbench.faults import injection
    from specbench.faults.catalog import HYBRID_MUTANTS, PrefixCacheOffWhenDrafting, StateStaleInMixedBatch
    from specbench.serve import ServeConfig, start_server
    from tests.support.cli_run import run_main
    from tests.support.tiny_hybrid import build_tiny_hybrid

    ap = argparse.ArgumentParser()
    ap.add_argument("--num-requests", default="8")
    ap.add_argument("--max-tokens", default="16")
    args = ap.parse_args()
    target = Path(tempfile.mkdtemp(prefix="stress-hybrid-")) / "target"
    build_tiny_hybrid(target, seed=0)
    common = dict(target=str(target), device="cpu", dtype="fp32", kv_cache_gb=0.1)
    faults = (None, StateStaleInMixedBatch.fault.name, PrefixCacheOffWhenDrafting.fault.name,
              *(m.fault.name for m in HYBRID_MUTANTS))
    names, rows = None, []
    with start_server(ServeConfig(EngineConfig(method="none", **common), served_model_name="h")) as plain:
        for fault in faults:
            on = ServeConfig(EngineConfig(method="ngram", max_num_steps=3, **common), served_model_name="h")
            with start_server(on, fault=injection(fault)) as spec:
                out = run_main("stress", "--base-url", spec.url, "--baseline-url", plain.url, "-k", "3", "--rule",
                               "output", "--quiet", "--conditions", "hybrid", "--num-requests", args.num_requests,
                               "--max-tokens", args.max_tokens).stdout
            table = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and "(c=" in line]
            names = [row[0].removeprefix("| ").split(" (c=")[0] for row in table]
            cells = [f"{row[4].split(' [')[0]}/{row[3]}{'' if row[1] == 'PASS' else ' ' + row[1]}" for row in table]
            headline = out.splitlines()[0].removeprefix("## specbench stress: ")
            smallest = ", ".join(re.findall(r"(?:FAIL|NO-CACHE-HITS) at ([\w+-]+) \(", headline)) or "-"
            rows.append(f"| {fault or 'clean'} | " + " | ".join(cells) + f" | {smallest} |")
            print(rows[-1], file=sys.stderr, flush=True)
    print("| served | " + " | ".join(names) + " | smallest failing |")
    print("|---" * (len(names) + 2) + "|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
