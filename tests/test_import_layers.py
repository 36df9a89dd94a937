"""Top-level packages of specbench import each other without cycles (every import counted, also in functions).

`runtime` (phases, CUDA-graph runner, hook seam) sits under both `engine` and `spec`; `engine` composes `spec`.
`runs` (sweep config, cell keys, turns, rows, schema) sits under `bench`, `backends` and `compare`; `bench` drives
`backends` and reuses `compare`'s estimators.
"""

from __future__ import annotations

import ast
from pathlib import Path

import specbench

ROOT = Path(specbench.__file__).parent
KNOWN_CYCLES: set[frozenset[str]] = set()  # none left; a new one fails


def _top(module: str) -> str:
    return module.split(".")[1]


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).with_suffix("").parts
        if rel == ("__init__",) or rel == ("__main__",):
            continue
        top = rel[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                if name.startswith("specbench.") and _top(name) != top:
                    edges.setdefault(top, set()).add(_top(name))
    return edges


def cycles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components with more than one package."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_top_level_packages():
    edges = import_graph()
    assert "spec" in edges["engine"] and "runtime" in edges["spec"]  # the walk sees real imports
    assert "engine" not in edges.get("spec", set()) and "engine" not in edges.get("runtime", set())
    assert cycles(edges) == KNOWN_CYCLES
    for shared in ("bench", "backends", "compare"):
        assert shared not in edges.get("runs", set())
    assert "bench" not in edges["backends"] and "bench" not in edges["compare"]


def test_the_walk_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


def test_the_generic_request_carries_no_proposer_state():
    import dataclasses

    from specbench.engine.request import Request

    names = {f.name for f in dataclasses.fields(Request)}
    assert not {n for n in names if "feature" in n or "draft" in n}, names


def test_kernels_import_no_private_helpers():
    """The Triton twins share the torch reference's helpers through their public names."""
    hits = []
    for path in (ROOT.parent / "kernels").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specbench"):
                hits += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert not hits, hits
