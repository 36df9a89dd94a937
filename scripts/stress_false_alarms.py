"""False alarms of `specbench stress` over HTTP: two clean `specbench serve` on the tiny pair (draft LM, k = 3, and
the same target without speculation, fp32 on --device), stressed RUNS times with the output rule (and the canary
rule: what a 16-bit server gets); prints each run's headline and "false alarms: N of RUNS runs"; exit 1 on any.

    python scripts/stress_false_alarms.py [--runs 10] [--device cpu] [--conditions gentle,concurrency-8,...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from specbench.config import EngineConfig
    from specbench.selftest.tiny import build_tiny_pair
    from specbench.serve import ServeConfig, start_server
    from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--conditions", default="")
    ap.add_argument("--num-requests", default="4")
    args = ap.parse_args()
    pair = tempfile.mkdtemp(prefix="stress-pair-")
    target, draft = build_tiny_pair(pair, seed=0, vocab_size=VOCAB_SIZE)
    for path in (target, draft):
        load_tiny_tokenizer().save_pretrained(path)
    common = dict(target=str(target), device=args.device, dtype="fp32", kv_cache_gb=0.25)
    on = ServeConfig(EngineConfig(method="draft", draft=str(draft), max_num_steps=3, **common), served_model_name="t")
    off = ServeConfig(EngineConfig(method="none", **common), served_model_name="t")
    alarms = 0
    with start_server(on) as spec, start_server(off) as plain:
        for run in range(args.runs):
            rule = "output" if run % 2 == 0 else "canary"
            cmd = [sys.executable, "-m", "specbench", "stress", "--base-url", spec.url, "--baseline-url", plain.url,
                   "-k", "3", "--rule", rule, "--num-requests", args.num_requests, "--max-tokens", "16", "--quiet",
                   "--window-tokens", "512", "--max-prompt-tokens", "700", "--seed", str(run)]  # new canaries each run
            if args.conditions:
                cmd += ["--conditions", args.conditions]
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            headline = done.stdout.splitlines()[0] if done.stdout else done.stderr.strip().splitlines()[-1]
            alarms += done.returncode != 0
            print(f"run {run} ({rule}): exit {done.returncode}: {headline}", flush=True)
    print(f"false alarms: {alarms} of {args.runs} runs")
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
