"""Shipped acceptance baselines of the selftest's own tiny pairs (reference_baselines.json, next to this file).

The selftest checks the engine under test against these, never against a baseline measured on that same engine
(which cannot fail). Regenerate after an intended acceptance change, on CPU, from a clean tree:

    python -m specbench.selftest.reference_baselines
    python -m specbench.selftest.reference_baselines --target window_moe   # that target's entries alone
    python -m specbench.selftest.reference_baselines --trees               # the tree rows' entries alone
    python -m specbench.selftest.reference_baselines --trees --target hybrid  # the hybrid target's tree row's

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
from specbench.speculation.draft_shape import CHAIN, DraftShape

PATH = Path(__file__).with_name("reference_baselines.json")
SHIPPED_SEEDS = tuple(range(32))
SHIPPED_NUM_STEPS = 3
COMMAND = "python -m specbench.selftest.reference_baselines"


def _key(method: str, seed: int, num_steps: int, target: str = "", shape: DraftShape = CHAIN) -> str:
    """`target`: "" for the seed's own tiny target, else the extra target's name (setups.TARGETS); `shape`: a tree
    row's (setups.TREE_SHAPE) adds `tree{topk}x{budget}`."""
    tree = f"tree{shape.eagle_topk}x{shape.num_draft_tokens or 'all'}/" if shape.is_tree else ""
    return f"{method}/" + (f"{target}/" if target else "") + tree + f"seed{seed}/k{num_steps}"


def _load() -> dict:
    return json.loads(PATH.read_text()) if PATH.exists() else {"baselines": {}}


def reference_baseline(method: str, seed: int, num_steps: int, target: str = "",
                       shape: DraftShape = CHAIN) -> AcceptanceBaseline | None:
    raw = _load()["baselines"].get(_key(method, seed, num_steps, target, shape))
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


def _measure(tmp: str, seeds, num_steps: int, target: str, *, chains: bool = True, trees: bool = True) -> dict:
    """Per seed and method: the chain baseline (`chains`), and the tree rows' (`trees`: setups.TREE_SHAPE; on the
    seed targets each method that drafts trees, on the hybrid one each of setups.HYBRID_TREE_METHODS)."""
    from dataclasses import replace

    from specbench.selftest.setups import (
        HYBRID,
        HYBRID_TREE_METHODS,
        METHODS,
        TREE_SHAPE,
        selftest_setups,
        target_tree_methods,
    )

    baselines = {}
    for seed in seeds:
        setups = selftest_setups(tmp, seed, METHODS, num_steps, target_name=target)
        runs = [(m, s, CHAIN) for m, s in setups.items()] if chains else []
        if trees:  # on the hybrid target every method that may host its one tree row (the run's choice)
            hosts = (tuple(m for m in HYBRID_TREE_METHODS if m in setups) if target == HYBRID
                     else target_tree_methods(target, tuple(setups)))
            runs += [(m, replace(setups[m], draft_shape=TREE_SHAPE), TREE_SHAPE) for m in hosts]
        for method, setup, shape in runs:
            measured = measure_acceptance(setup)
            name = f"selftest tiny {target + ' ' if target else ''}target seed {seed}"
            label = f"selftest {method}" + (f" {shape.label()}" if shape.is_tree else "")
            shipped = AcceptanceBaseline(name, label, method, num_steps, measured.num_prompts,
                                         measured.max_tokens, measured.num_drafted_per_pos,
                                         measured.num_accepted_per_pos, measured.num_rounds)
            baselines[_key(method, seed, num_steps, target, shape)] = baseline_to_json(shipped)
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


def add_trees(seeds=SHIPPED_SEEDS, num_steps: int = SHIPPED_NUM_STEPS, target: str = "") -> dict:
    """The shipped file with the tree rows' baselines of `target` ("": the seed targets) (re)measured and every other
    entry kept as shipped (`--trees [--target NAME]`); their commit is recorded beside the file's."""
    torch.set_num_threads(1)
    data = _load()
    with tempfile.TemporaryDirectory(prefix="specbench-reference-") as tmp:
        data["baselines"].update(_measure(tmp, seeds, num_steps, target, chains=False))
    if target:
        data.setdefault("tree_target_commits", {})[target] = _commit()
    else:
        data["tree_commit"] = _commit()
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
    elif sys.argv[1:2] == ["--trees"]:  # the tree rows' entries alone; `--trees --target hybrid`: that target's
        PATH.write_text(_dump(add_trees(target=sys.argv[3] if sys.argv[2:3] == ["--target"] else "")))
    else:
        PATH.write_text(_dump(generate()))
    print(f"wrote {PATH}")
