"""Programmatic dependent launch (kernels/pdl.py) stays exact only if every kernel that may launch early waits for the
one before it before touching memory. Checked on the source, so a kernel added later cannot skip it: each Triton
kernel of specbench/kernels takes USE_PDL and runs wait_for_inputs(USE_PDL) first, in every program; each launch of
one, anywhere in specbench, takes both launch keywords from launch_overlap (one decision, never launch_pdl alone).
The GPU test runs the fused engine with PDL on and off and asserts the same tokens (a missed wait would race).
PDL is on by default on CUDA (sm90+); SPECBENCH_PDL=off turns it off."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "specbench" / "kernels"


def _is_jit(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Attribute) and d.attr == "jit" for d in node.decorator_list)


def _kernels() -> dict[str, ast.FunctionDef]:
    """Every @triton.jit function of specbench/kernels launched with a grid (named *kernel*; helpers are inlined)."""
    found = {}
    for path in sorted(KERNELS.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and _is_jit(node) and "kernel" in node.name:
                found[node.name] = node
    return found


def _launches() -> list[tuple[str, str, ast.Call, ast.FunctionDef | None]]:
    """(file, kernel name, the launch call, the enclosing function) for every `kernel[grid](...)` in specbench."""
    names = set(_kernels())
    out = []
    for path in sorted((ROOT / "specbench").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            for node in ast.walk(func):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in names):
                    out.append((str(path.relative_to(ROOT)), node.func.value.id, node, func))
    return out


def _is_overlap_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "launch_overlap"


def _spreads_overlap(call: ast.Call, func: ast.FunctionDef) -> bool:
    """`**launch_overlap(t)` among the launch's keywords, directly or inside a dict literal spread into it."""
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        if _is_overlap_call(kw.value):
            return True
        if isinstance(kw.value, ast.Name):
            for node in ast.walk(func):
                if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == kw.value.id
                                                         for t in node.targets)
                        and isinstance(node.value, ast.Dict)
                        and any(k is None and _is_overlap_call(v) for k, v in zip(node.value.keys,
                                                                                   node.value.values))):
                    return True
    return False


def test_every_kernel_waits_for_its_inputs_first():
    kernels = _kernels()
    assert len(kernels) >= 25, sorted(kernels)
    for name, node in kernels.items():
        args = [a.arg for a in node.args.args]
        assert "USE_PDL" in args, f"{name} takes no USE_PDL"
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        first = body[0]
        assert (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)
                and isinstance(first.value.func, ast.Name) and first.value.func.id == "wait_for_inputs"
                and [a.id for a in first.value.args if isinstance(a, ast.Name)] == ["USE_PDL"]), (
            f"{name}: the first statement must be wait_for_inputs(USE_PDL), before any load or store")


def test_every_launch_takes_launch_overlap():
    launches = _launches()
    assert {name for _, name, _, _ in launches} == set(_kernels()), "every kernel is launched somewhere"
    for path, name, call, func in launches:
        assert _spreads_overlap(call, func), f"{path}: {name} launched without **launch_overlap(...)"
        assert not any(kw.arg in ("launch_pdl", "USE_PDL") for kw in call.keywords), (
            f"{path}: {name} sets launch_pdl / USE_PDL itself; launch_overlap decides both")


def test_launch_overlap_is_off_on_cpu_and_one_decision():
    from specbench.kernels.pdl import launch_overlap

    assert launch_overlap(torch.zeros(1)) == {"USE_PDL": False, "launch_pdl": False}


def test_on_unless_the_environment_says_off(monkeypatch):
    from specbench.kernels import pdl

    monkeypatch.delenv(pdl.ENV, raising=False)
    assert pdl.mode() == "on"
    monkeypatch.setenv(pdl.ENV, " OFF ")
    assert pdl.mode() == "off"


def test_an_unknown_mode_is_one_clear_error(monkeypatch):
    from specbench.errors import SpecbenchError
    from specbench.kernels import pdl

    monkeypatch.setenv(pdl.ENV, "sometimes")
    with pytest.raises(SpecbenchError, match="supported: off, on"):
        pdl.mode()


_SAME_TOKENS = """
import sys
from specbench import LLM, SamplingParams
from specbench.perf.hybrid_floor import cut_preset
from specbench.perf.moe_targets import resolve_target
# A MoE target (gemv projections, q/k norm + RoPE + store, paged attention, routing, expert kernels, graphs) and a
# hybrid one (the recurrent verify kernels, offset norms), dummy weights, cut to a few layers
targets = [resolve_target("qwen3-30b-a3b", 4).preset, cut_preset("qwen3-next-80b-a3b", 4)[0]]
prompts = [[(7 * i + 3 * j) % 1000 + 1 for j in range(40 + 9 * i)] for i in range(3)]
for target in targets:
    llm = LLM(target, load_format="dummy", dtype="bfloat16", device="cuda", max_concurrency=4, max_model_len=512,
              kv_cache_gb=1.0)
    outs = llm.generate(prompts, SamplingParams(max_tokens=24, ignore_eos=True))
    print(target, [list(o.output_token_ids) for o in outs])
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pdl_on_and_off_give_the_same_tokens():
    """The fused engine (graphs, every kernel launched with PDL on a Hopper card) against the same engine with PDL
    off, in two processes (the mode is read once a process): a kernel that read before its wait would race.
    Not yet run on a GPU (session 23 got no device machine): PDL stays opt-in until it has."""
    outs = []
    for mode in ("on", "off"):
        env = {**os.environ, "SPECBENCH_PDL": mode, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", _SAME_TOKENS], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        outs.append([line for line in done.stdout.splitlines() if line.startswith(("qwen3", "Qwen3"))])
    assert len(outs[0]) == 2 and outs[0] == outs[1], outs
