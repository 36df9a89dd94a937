"""The layers of specbench, declared once (`LAYERS`), and an import graph that must respect them.

What is walked: every product folder (specbench/, which holds them all: tests/test_no_shadowing.py), or what a
pyproject's `package-dir` maps.
What counts as an import, every one of them, with no exception list:
- module-level imports;
- imports inside functions: a lazy import still runs, only later, so it is a dependency like any other;
- imports under `if TYPE_CHECKING:` too: they never run, but a type named in a signature is still something the
  reader must know, and exempting them would let the layers drift through annotations first;
- relative imports, and `importlib.import_module` / `__import__` with a literal specbench name.
A unit is one top-level subpackage or module of specbench (`speculation`, `config`, `kernels`, ...); the root package's own
`__init__.py` (__version__ and the lazy facade `LLM`) is the unit `specbench`.

The rule: a unit imports only units of layers strictly below its own. Units of one layer are independent of each
other, so the order alone rules out cycles; the cycle search names any cycle anyway, with the imports that make it.

Inside a unit the layers say nothing, so a second rule holds module by module: no circle of imports between modules
(`module_graph`: every kind of import above, each read as the module it names; a cycle is a strongly connected
component of two modules or more). A circle is two modules that can only be read, and changed, together.
"""

from __future__ import annotations

import ast
import functools
import os
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Bottom to top. A new unit must be placed here (test_every_unit_sits_in_one_layer).
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer) for layer in (
    # The one exception type users see; every layer raises it.
    {"errors"},
    # Host lists to device tensors without stalling the host (pinned, non-blocking): any layer's step-loop code,
    # the recurrent state slots' included, builds its tensors through it.
    {"device_copy"},
    # Environment switches with fixed values (SPECBENCH_PDL in kernels, SPECBENCH_PENDING_FUSIONS in models).
    {"env_modes"},
    # Grammar-constrained decoding (specs, per-request grammar state, token bitmasks; llguidance behind an extra):
    # under `sampling_params`, whose SamplingParams carry a GrammarSpec; it declares the hooks it calls
    # (grammar/hooks.py), which runtime's seam satisfies.
    {"grammar"},
    # Leaves: plain values and tensor helpers that know no model or engine. `config` (engine options, validated
    # alone) is here so that every layer that builds, runs or records an engine reads it; `kernels` (Triton:
    # tensors in, tensors out) is here so that attention, the models and the verifier all launch them.
    # `recurrent` (hybrid targets' Gated DeltaNet: the state rule, its layer, the state slots) sits beside `kv`.
    {"config", "execution_paths", "extras", "json_file", "kernels", "kv", "recurrent", "registry",
     "sampling_params"},
    # Attention (metadata, torch reference, Triton and flashinfer backends) over the paged KV cache; workloads
    # (prompt sets) need only sampling parameters.
    {"attention", "workloads"},
    # Models run attention; `runtime` (phases, CUDA-graph runner, the hook seam) sits under both the engine and the
    # proposers.
    {"models", "runtime"},
    # Proposers and verifier (`speculation`): they do not know the engine that calls them.
    {"speculation"},
    # The engine composes models, attention, runtime and a proposer.
    {"engine"},
    # `llm`: the library entry (an engine; a fault only when its caller hands one over); `metrics`: computed from
    # engine outputs; `faults`: the mutants (test machinery), phase hooks plugged into runtime's seam and mutants
    # that bend a built engine from outside. One layer: `llm` cannot import the faults it applies.
    {"faults", "llm", "metrics"},
    # The package root: __version__ (read by runs and serve) and the lazy facade `specbench.LLM`.
    {"specbench"},
    # `runs`: sweep config, cell keys, rows, schema, environment; `generate`: one-shot generation; `perf`: the GPU
    # benchmark harness of scripts/bench_*.py (BENCHMARKS.md), timing models and proposers through the root's `LLM`.
    # No command imports `perf`, and it imports no sweep: it sits as low as the root it drives, apart from `bench`.
    {"generate", "perf", "runs"},
    # `backends` run a sweep's cells on the embedded engine or a server; `compare` reads stored runs.
    {"backends", "compare"},
    # `verification`: what a correct speculative engine or server must do (first turns, the lossless rule), once
    # for every front end above it (check, check-lossless in bench, gate).
    {"verification"},
    # `bench` drives backends and reuses compare's estimators; `check` is the oracle battery; `serve` the HTTP server.
    {"bench", "check", "serve"},
    # `stress`: speculation on vs off over the conditions bugs need, on backends (the gate's stress stage).
    {"stress"},
    # The check battery against every fault; `gate` (the CI command: a sweep read back and judged in stages).
    {"gate", "selftest"},
    # The CLI only parses arguments and calls the library below it.
    {"cli"},
    # `python -m specbench`.
    {"__main__"},
))

# Left out of the module-level cycle test (test_no_cycle_between_modules): nothing. Every module of every unit is in it.
CYCLE_TEST_EXCLUDED_PREFIXES: tuple[str, ...] = ()

TEST_ONLY_MODULES = ("tests", "pytest", "hypothesis")  # never imported by product code
# The fault mutants are test machinery: only the commands that inject them (check, selftest, the CLI's --inject)
# import them; production code (llm, bench, backends, serve, gate, ...) gets a fault from its caller, as a value.
FAULT_CALLERS = frozenset({"check", "selftest", "cli"})


@dataclass(frozen=True)
class Import:
    source: str  # importing module, e.g. "specbench.speculation.verify.chain_triton"
    target: str  # imported module or name, e.g. "specbench.kernels.verify_kernels"
    path: str  # file, relative to the repo root
    line: int
    kind: str  # "module" | "function" | "type-checking"

    def describe(self) -> str:
        where = {"module": "", "function": " (inside a function)", "type-checking": " (under TYPE_CHECKING)"}
        return f"{self.path}:{self.line}{where[self.kind]} imports {self.target}"


def product_folders(repo: Path = REPO) -> dict[str, Path]:
    """Package name -> folder, from pyproject (the one declaration of what ships): its `package-dir` map, else the
    top-level names `packages.find` includes, each in the folder of its name."""
    setuptools = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
    if "package-dir" in setuptools:
        return {package: repo / folder for package, folder in setuptools["package-dir"].items()}
    include = setuptools["packages"]["find"]["include"]
    return {name: repo / name for name in include if "*" not in name and "." not in name}


def module_name(package: str, folder: Path, path: Path) -> str:
    parts = path.relative_to(folder).with_suffix("").parts
    return ".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _modules(package: str, folder: Path) -> Iterator[tuple[str, Path]]:
    # os.walk does not follow symlinks: a linked folder is not walked twice.
    for directory, subdirs, files in os.walk(folder):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            yield module_name(package, folder, Path(directory) / name), Path(directory) / name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            anchor = package[:len(package) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        # One target per name: `from specbench import config` reads the unit config, `from specbench import LLM`
        # the root's facade.
        return [base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def imports_of(module: str, path: Path, shown_from: Path) -> list[Import]:
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, kind: str) -> None:
        for target in _targets(node, module, is_package):
            found.append(Import(module, target, str(path.relative_to(shown_from)), node.lineno, kind))
        for child in ast.iter_child_nodes(node):
            child_kind = kind
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and kind == "module":
                child_kind = "function"
            if isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body:
                child_kind = "type-checking"
            visit(child, child_kind)

    visit(ast.parse(path.read_text(), filename=str(path)), "module")
    return found


def walk(repo: Path = REPO) -> tuple[set[str], list[Import]]:
    """(every product module, every import in them)."""
    modules: set[str] = set()
    found: list[Import] = []
    for package, folder in product_folders(repo).items():
        for module, path in _modules(package, folder):
            if module not in modules:  # found twice (a copy under specbench/): walked once
                modules.add(module)
                found += imports_of(module, path, repo)
    return modules, found


def unit_of(name: str, units: set[str]) -> str | None:
    """specbench.speculation.tree.kv -> speculation; specbench -> specbench (the root); outside specbench -> None."""
    parts = name.split(".")
    if parts[0] != "specbench":
        return None
    if len(parts) == 1 or parts[1] not in units:  # `from specbench import LLM` reads the root's facade
        return "specbench"
    return parts[1]


def unit_graph(modules: set[str], found: list[Import]) -> dict[tuple[str, str], list[Import]]:
    """(importing unit, imported unit) -> the imports behind that edge; imports inside one unit left out."""
    units = {m.split(".")[1] for m in modules if "." in m} | {"specbench"}
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in found:
        source, target = unit_of(imp.source, units), unit_of(imp.target, units)
        if target is not None and target != source:
            sites = edges.setdefault((source, target), [])
            if imp not in sites:
                sites.append(imp)
    return edges


def module_of(name: str, modules: set[str]) -> str | None:
    """The product module an import reads: the longest prefix of `name` that is a module (`from a.b import C` reads
    a.b; `from a import b` reads a.b when b is a module, else a's __init__); outside the product: None.

    Importing a.b also runs the package a's __init__ first; that is no edge here. A package whose __init__ re-exports
    its modules would otherwise sit in a circle with each of them that imports a sibling by its full name, which is
    harmless (the package is already in sys.modules). `from a import C` of a name that __init__ defines is an edge."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def module_graph(modules: set[str], found: list[Import]) -> dict[tuple[str, str], list[Import]]:
    """(importing module, imported module) -> the imports behind that edge; a module importing itself left out."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in found:
        target = module_of(imp.target, modules)
        if target is not None and target != imp.source:
            sites = edges.setdefault((imp.source, target), [])
            if imp not in sites:
                sites.append(imp)
    return edges


def cycles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
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


def _layer_of() -> dict[str, int]:
    return {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


@functools.cache  # one walk of the checkout for the file's tests (each read-only): ~1.5 s a walk on 2 busy cores
def _real_graph() -> tuple[set[str], list[Import], dict[tuple[str, str], list[Import]]]:
    modules, found = walk()
    return modules, found, unit_graph(modules, found)


def test_the_walk_covers_every_product_folder():
    modules, found, _ = _real_graph()
    folders = product_folders()
    assert set(folders) == {"specbench"}
    assert {"specbench.kernels.gemv", "specbench.workloads.gsm8k"} <= modules
    for package, folder in folders.items():
        expected = {module_name(package, folder, path) for path in folder.rglob("*.py")}
        assert expected and expected <= modules, (package, sorted(expected - modules))
    assert {imp.kind for imp in found} == {"module", "function", "type-checking"}


def test_every_unit_sits_in_one_layer():
    modules, _, _ = _real_graph()
    units = {m.split(".")[1] for m in modules if "." in m} | {"specbench"}
    declared = [unit for layer in LAYERS for unit in layer]
    assert len(declared) == len(set(declared)), "a unit is declared in two layers"
    assert units - set(declared) == set(), "place these units in LAYERS"
    assert set(declared) - units == set(), "LAYERS names units that no longer exist"


def test_no_import_runs_up_the_layers():
    _, _, edges = _real_graph()
    layer = _layer_of()  # an undeclared unit fails test_every_unit_sits_in_one_layer; here it sits at the bottom
    wrong = [
        f"{source} (layer {layer.get(source, 0)}) -> {target} (layer {layer.get(target, 0)}): {imp.describe()}"
        for (source, target), sites in sorted(edges.items()) if layer.get(target, 0) >= layer.get(source, 0)
        for imp in sites
    ]
    assert not wrong, "imports that run up (or across) the layers:\n" + "\n".join(wrong)


def test_no_cycle_between_units():
    _, _, edges = _real_graph()
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    found = cycles(graph)
    detail = [imp.describe() for component in found for (s, t), sites in sorted(edges.items())
              if s in component and t in component for imp in sites]
    assert not found, f"cycles {sorted(map(sorted, found))} through:\n" + "\n".join(detail)


def _module_cycles(modules: set[str], found: list[Import],
                   excluded: tuple[str, ...] = ()) -> tuple[set[frozenset[str]], list[str]]:
    """(the module cycles, the imports that make them); modules named by `excluded` prefixes left out."""
    def kept(module: str) -> bool:
        return not any(module == prefix or module.startswith(prefix + ".") for prefix in excluded)

    edges = {edge: sites for edge, sites in module_graph(modules, found).items() if kept(edge[0]) and kept(edge[1])}
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    found_cycles = cycles(graph)
    detail = [f"{sorted(component)}: {imp.describe()}" for component in sorted(found_cycles, key=sorted)
              for (s, t), sites in sorted(edges.items()) if s in component and t in component for imp in sites]
    return found_cycles, detail


def test_no_cycle_between_modules():
    modules, found, _ = _real_graph()
    found_cycles, detail = _module_cycles(modules, found, CYCLE_TEST_EXCLUDED_PREFIXES)
    assert not found_cycles, "module import cycles (break each: a leaf module, a Protocol, a list registered from " \
                             "above):\n" + "\n".join(detail)


def test_kernels_is_a_leaf():
    """Triton kernels know tensors only: no proposer, config, model or attention type reaches into them (their one
    environment switch, SPECBENCH_PDL, read through env_modes)."""
    _, _, edges = _real_graph()
    assert {target for source, target in edges if source == "kernels"} <= {"errors", "env_modes"}


def test_only_the_fault_callers_import_the_faults():
    _, _, edges = _real_graph()
    importers = {source for source, target in edges if target == "faults"}
    assert importers <= FAULT_CALLERS, {s: [i.describe() for i in edges[(s, "faults")]] for s in importers
                                        - FAULT_CALLERS}
    assert "check" in importers  # the scan sees the callers that do


def test_no_product_unit_imports_the_gpu_benchmark_harness():
    """`perf` is run by scripts/bench_*.py alone: a command that needs one of its pieces moves that piece out of it."""
    _, _, edges = _real_graph()
    importers = {source for source, target in edges if target == "perf"}
    assert not importers, {s: [i.describe() for i in edges[(s, "perf")]] for s in importers}


def test_product_code_imports_no_test_machinery():
    _, found, _ = _real_graph()
    hits = [imp.describe() for imp in found if imp.target.split(".")[0] in TEST_ONLY_MODULES]
    assert not hits, hits


def test_the_walk_sees_every_kind_of_import(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "specbench" = "src", "specbench.kernels" = "kern" }\n')
    files = {
        "src/__init__.py": "from specbench.top import thing\n",
        "src/top.py": "def f():\n    from specbench.low import x\n",
        "src/low/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from specbench.mid import T\n"
                               "else:\n    import specbench.errors\n",
        "src/low/inner.py": "from ..mid import y\nfrom . import sibling\n",
        "src/mid.py": "import importlib\nimportlib.import_module('specbench.kernels.k')\n",
        "src/errors.py": "",
        "kern/__init__.py": "",
        "kern/k.py": "import specbench\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules, found = walk(tmp_path)
    assert "specbench.kernels.k" in modules and "specbench.low.inner" in modules
    edges = unit_graph(modules, found)
    kinds = {edge: {imp.kind for imp in sites} for edge, sites in edges.items()}
    assert kinds == {
        ("specbench", "top"): {"module"},
        ("top", "low"): {"function"},
        ("low", "mid"): {"type-checking", "module"},  # the relative import in low/inner.py is a plain one
        ("low", "errors"): {"module"},  # the `else:` branch of TYPE_CHECKING runs
        ("mid", "kernels"): {"module"},
        ("kernels", "specbench"): {"module"},
    }
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    assert cycles(graph) == {frozenset({"specbench", "top", "low", "mid", "kernels"})}


def test_the_walk_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


def test_the_module_cycle_test_finds_a_cycle_inside_one_unit(tmp_path):
    """A circle inside one unit, made of a type-only import and a function-level one, that the unit graph cannot see;
    a package __init__ re-exporting its modules is no circle; the exclusion drops exactly the modules it names."""
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = { "specbench" = "src" }\n')
    files = {
        "src/__init__.py": "",
        "src/unit/__init__.py": "from specbench.unit.a import A\nfrom specbench.unit import b\n",
        "src/unit/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from specbench.unit.b import B\n"
                         "class A: ...\n",
        "src/unit/b.py": "def f():\n    from .a import A\nclass B: ...\n",
        "src/unit/c.py": "import specbench.unit.a\nfrom specbench.unit import b\n",  # reads the modules, no circle
        "src/other/__init__.py": "",
        "src/other/x.py": "from specbench.other import y\n",
        "src/other/y.py": "from specbench.other.x import thing\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules, found = walk(tmp_path)
    assert unit_graph(modules, found) == {}  # every import stays inside its unit: the unit graph sees nothing
    edges = module_graph(modules, found)
    assert ("specbench.unit.c", "specbench.unit.b") in edges and ("specbench.unit.c", "specbench.unit") not in edges
    found_cycles, detail = _module_cycles(modules, found)
    assert found_cycles == {frozenset({"specbench.unit.a", "specbench.unit.b"}),
                            frozenset({"specbench.other.x", "specbench.other.y"})}
    assert "src/unit/a.py:3 (under TYPE_CHECKING) imports specbench.unit.b.B" in "\n".join(detail)
    assert "src/unit/b.py:2 (inside a function) imports specbench.unit.a.A" in "\n".join(detail)
    unit_cycle = frozenset({"specbench.unit.a", "specbench.unit.b"})
    assert _module_cycles(modules, found, ("specbench.other",))[0] == {unit_cycle}
    assert _module_cycles(modules, found, ("specbench.oth",))[0] == found_cycles  # a prefix of a name is no folder


def test_the_generic_request_carries_no_proposer_state():
    import dataclasses

    from specbench.engine.request import Request

    names = {f.name for f in dataclasses.fields(Request)}
    assert not {n for n in names if "feature" in n or "draft" in n}, names


def test_kernels_and_their_launchers_import_no_private_helpers():
    """The Triton code (kernels/ and every module that launches it, e.g. speculation/verify/chain_triton.py) shares
    the torch reference's helpers through their public names."""
    modules, found, _ = _real_graph()
    launchers = {imp.source for imp in found if imp.target.startswith("specbench.kernels")}
    hits = [imp.describe() for imp in found
            if imp.source in launchers | {m for m in modules if m.startswith("specbench.kernels")}
            and imp.target.startswith("specbench.") and imp.target.rsplit(".", 1)[-1].startswith("_")]
    assert "specbench.speculation.verify.chain_triton" in launchers
    assert not hits, hits
