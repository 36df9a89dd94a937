"""No step-loop code builds a device tensor straight from a host list (`torch.tensor(values, device=...)`): that copy
comes from pageable memory, which holds the host until the stream drains, the step launched ahead included, and so
serialises the overlapped loop with the GPU. specbench/device_copy.py stages through pinned memory instead.

Found on the H100 (session 22): a hybrid target's state commit built four such tensors a step, ~1.2 ms of a 3.15 ms
plain decode step at concurrency 1. The CPU cannot see the stall; this reads the source instead. Debug-invariant
checks (functions named check_*) are exempt: they read the device back anyway.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The packages whose code runs every step or round (the engine loop, the forward, the proposers and verifier).
STEP_LOOP = ("engine", "recurrent", "runtime", "attention", "speculation", "kv", "models")


def _is_torch_tensor_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("tensor", "as_tensor") and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch")


def pageable_device_tensors(source: str) -> list[tuple[int, str]]:
    """(line, function) of each torch.tensor / torch.as_tensor call given a device other than the CPU, or moved to
    one by .to / .cuda straight away."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if _is_torch_tensor_call(child) and not function.startswith("check_"):
                for keyword in child.keywords:
                    is_cpu = isinstance(keyword.value, ast.Constant) and keyword.value.value == "cpu"
                    if keyword.arg == "device" and not is_cpu:
                        found.append((child.lineno, function))
            # torch.tensor(values).to(device): the same pageable copy, spelled in two steps
            is_moved = (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                        and child.func.attr in ("to", "cuda") and _is_torch_tensor_call(child.func.value))
            if is_moved and not function.startswith("check_"):
                found.append((child.lineno, function))
            visit(child, name)

    visit(ast.parse(source), "")
    return found


def test_the_scan_finds_a_pageable_copy_and_spares_staged_and_debug_ones():
    source = ("import torch\n"
              "def step(values, device):\n"
              "    a = torch.tensor(values, dtype=torch.int64, device=device)\n"
              "    b = torch.tensor(values, device='cpu')\n"
              "    c = torch.tensor(values).to(device, non_blocking=True)\n"
              "    return to_device(values, torch.int64, device)\n"
              "def check_rows(values, device):\n"
              "    return torch.tensor(values, device=device).tolist()\n")
    assert pageable_device_tensors(source) == [(3, "step"), (5, "step")]


def test_no_step_loop_code_copies_host_lists_to_the_device_from_pageable_memory():
    offenders = []
    for package in STEP_LOOP:
        for path in sorted((REPO / "specbench" / package).rglob("*.py")):
            for line, function in pageable_device_tensors(path.read_text()):
                offenders.append(f"{path.relative_to(REPO)}:{line} ({function or 'module level'})")
    assert not offenders, ("host lists copied to the device from pageable memory (use specbench/device_copy.py "
                           "to_device / tensor_to_device):\n" + "\n".join(offenders))
