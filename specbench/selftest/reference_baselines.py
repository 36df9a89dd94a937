"""Shipped acceptance baselines of the selftest's own tiny pairs (reference_baselines.json, next to this file).

The selftest checks the engine under test against these, never against a baseline measured on that same engine
(which cannot fail). Regenerate after an intended acceptance change, on CPU, from a clean tree:

    python -m specbench.selftest.reference_baselines
    python -m specbench.selftest.reference_baselines --target window_moe   # that target's entries alone

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

from specbench.check.baseline import (
    AcceptanceBaseline,
    baseline_from_json,
    baseline_to_json,
    measure_acceptance,
)

PATH = Path(__file__).with_name("reference_baselines.json")
SHIPPED_SEEDS = tuple(range(32))
SHIPPED_NUM_STEPS = 3
COMMAND = "python -m specbench.selftest.reference_baselines"


def _key(method: str, seed: int, num_steps: int, target: str = "") -> str:
    """`target`: "" for the seed's own tiny target, else the extra target's name (setups.TARGETS)."""
    return f"{method}/" + (f"{target}/" if target else "") + f"seed{seed}/k{num_steps}"


def _load() -> dict:
    return json.loads(PATH.read_text()) if PATH.exists() else {"baselines": {}}


def reference_baseline(method: str, seed: int, num_steps: int, target: str = "") -> AcceptanceBaseline | None:
    raw = _load()["baselines"].get(_key(method, seed, num_steps, target))
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


def _measure(tmp: str, seeds, num_steps: int, target: str) -> dict:
    from specbench.selftest.setups import METHODS, selftest_setups

    baselines = {}
    for seed in seeds:
        for method, setup in selftest_setups(tmp, seed, METHODS, num_steps, target_name=target).items():
            measured = measure_acceptance(setup)
            name = f"selftest tiny {target + ' ' if target else ''}target seed {seed}"
            shipped = AcceptanceBaseline(name, f"selftest {method}", method, num_steps, measured.num_prompts,
                                         measured.max_tokens, measured.num_drafted_per_pos,
                                         measured.num_accepted_per_pos, measured.num_rounds)
            baselines[_key(method, seed, num_steps, target)] = baseline_to_json(shipped)
    return baselines


def generate(seeds=SHIPPED_SEEDS, num_steps: int = SHIPPED_NUM_STEPS) -> dict:
    """Every seed's own target, and the extra targets (setups.TARGETS: the sliding-window + MoE one) on the same
    seeds."""
    from specbench.selftest.setups import TARGETS

    torch.set_num_threads(1)
    baselines = {}
    with tempfile.TemporaryDirectory(prefix="specbench-reference-") as tmp:
        for target in TARGETS:
            baselines.update(_measure(tmp, seeds, num_steps, target))
    return {"generated_by": COMMAND, "commit": _commit(), "device": "cpu", "dtype": "fp32", "baselines": baselines}


def add_target(target: str, seeds=SHIPPED_SEEDS, num_steps: int = SHIPPED_NUM_STEPS) -> dict:
    """The shipped file with one target's baselines (re)measured and every other entry kept as shipped (`--target
    NAME`: a new target lands without moving the others; its entries' commit is recorded beside the file's)."""
    torch.set_num_threads(1)
    data = _load()
    with tempfile.TemporaryDirectory(prefix="specbench-reference-") as tmp:
        data["baselines"].update(_measure(tmp, seeds, num_steps, target))
    data.setdefault("target_commits", {})[target] = _commit()
    return data


def _dump(data: dict) -> str:
    """One baseline per line: diffs of a regeneration show which pairs moved."""
    head = {k: v for k, v in data.items() if k != "baselines"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data["baselines"].items()]
    return json.dumps(head, indent=1)[:-2] + ',\n "baselines": {\n' + ",\n".join(lines) + "\n }\n}\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--target"]:  # e.g. --target window_moe
        PATH.write_text(_dump(add_target(sys.argv[2])))
    else:
        PATH.write_text(_dump(generate()))
    print(f"wrote {PATH}")
