"""Shipped acceptance baselines of the selftest's own tiny pairs (reference_baselines.json, next to this file).

The selftest checks the engine under test against these, never against a baseline measured on that same engine
(which cannot fail). Regenerate after an intended acceptance change, on CPU, from a clean tree:

    python -m specbench.selftest.reference_baselines

The file records the commit it was generated at. Every method of the selftest (selftest/drafters.py: each registered
proposer) has a baseline per shipped seed; a baseline holds per-position drafted / accepted counts and the number of
verify rounds, so drafting per round is compared too (check/baseline.py). 32 seeds x 4 methods take ~2 min on CPU.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import torch

from specbench.check.baseline import AcceptanceBaseline, baseline_from_json, baseline_to_json, measure_acceptance

PATH = Path(__file__).with_name("reference_baselines.json")
SHIPPED_SEEDS = tuple(range(32))
SHIPPED_NUM_STEPS = 3
COMMAND = "python -m specbench.selftest.reference_baselines"


def _key(method: str, seed: int, num_steps: int) -> str:
    return f"{method}/seed{seed}/k{num_steps}"


def _load() -> dict:
    return json.loads(PATH.read_text()) if PATH.exists() else {"baselines": {}}


def reference_baseline(method: str, seed: int, num_steps: int) -> AcceptanceBaseline | None:
    raw = _load()["baselines"].get(_key(method, seed, num_steps))
    return None if raw is None else baseline_from_json(raw)


def reference_source() -> str:
    """Where the shipped baselines come from, for a check's detail line."""
    return f"shipped reference (commit {_load().get('commit', '?')[:10]})"


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=Path(__file__).parent,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def generate(seeds=SHIPPED_SEEDS, num_steps: int = SHIPPED_NUM_STEPS) -> dict:
    from specbench.selftest.setups import METHODS, selftest_setups

    torch.set_num_threads(1)
    baselines = {}
    with tempfile.TemporaryDirectory(prefix="specbench-reference-") as tmp:
        for seed in seeds:
            for method, setup in selftest_setups(tmp, seed, METHODS, num_steps).items():
                measured = measure_acceptance(setup)
                shipped = AcceptanceBaseline(f"selftest tiny target seed {seed}", f"selftest {method}", method,
                                             num_steps, measured.num_prompts, measured.max_tokens,
                                             measured.num_drafted_per_pos, measured.num_accepted_per_pos,
                                             measured.num_rounds)
                baselines[_key(method, seed, num_steps)] = baseline_to_json(shipped)
    return {"generated_by": COMMAND, "commit": _commit(), "device": "cpu", "dtype": "fp32", "baselines": baselines}


def _dump(data: dict) -> str:
    """One baseline per line: diffs of a regeneration show which pairs moved."""
    head = {k: v for k, v in data.items() if k != "baselines"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data["baselines"].items()]
    return json.dumps(head, indent=1)[:-2] + ',\n "baselines": {\n' + ",\n".join(lines) + "\n }\n}\n"


if __name__ == "__main__":
    PATH.write_text(_dump(generate()))
    print(f"wrote {PATH}")
