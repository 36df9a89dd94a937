"""No import circle between the modules of `specbench.speculation`, counting every import the layer test counts
(module-level, inside functions, under TYPE_CHECKING: tests/test_import_layers.py says why). The layer test proves the
units acyclic; a circle between two modules of one unit is invisible to it, so this walks the speculation unit's own
modules."""

from __future__ import annotations

from tests.test_import_layers import Import, cycles, walk

PACKAGE = "specbench.speculation"


def module_edges(modules: set[str], found: list[Import], package: str) -> dict[tuple[str, str], list[Import]]:
    """(importing module, imported module) -> the imports behind that edge, both modules inside `package`. An imported
    name is read as the module that holds it (`from package.m import X` reads package.m)."""

    def module_of(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    def is_inside(module: str) -> bool:
        return module == package or module.startswith(package + ".")

    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in found:
        target = module_of(imp.target)
        if is_inside(imp.source) and is_inside(target) and target != imp.source:
            edges.setdefault((imp.source, target), []).append(imp)
    return edges


def module_cycles(edges: dict[tuple[str, str], list[Import]]) -> set[frozenset[str]]:
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    return cycles(graph)


def test_no_module_cycle_inside_speculation():
    modules, found = walk()
    edges = module_edges(modules, found, PACKAGE)
    assert (f"{PACKAGE}.registry", f"{PACKAGE}.capabilities") in edges  # the walk sees the unit's own imports
    circles = module_cycles(edges)
    detail = [imp.describe() for circle in circles for (source, target), sites in sorted(edges.items())
              if source in circle and target in circle for imp in sites]
    assert not circles, f"import circles {sorted(map(sorted, circles))} through:\n" + "\n".join(detail)


def test_lazy_and_type_only_imports_close_circles():
    a, b, c = f"{PACKAGE}.a", f"{PACKAGE}.tree.b", f"{PACKAGE}.tree.c"
    modules = {PACKAGE, a, f"{PACKAGE}.tree", b, c, "specbench.engine"}
    found = [
        Import(a, f"{b}.Thing", "a.py", 1, "module"),  # a name of b: reads b
        Import(b, a, "tree/b.py", 5, "function"),  # lazy: still an edge
        Import(b, c, "tree/b.py", 3, "module"),
        Import(c, f"{b}.Other", "tree/c.py", 4, "type-checking"),  # type-only: still an edge
        Import(b, "specbench.engine.x", "tree/b.py", 6, "module"),  # outside the package: not walked
        Import(a, "torch", "a.py", 2, "module"),
    ]
    edges = module_edges(modules, found, PACKAGE)
    assert set(edges) == {(a, b), (b, a), (b, c), (c, b)}
    assert module_cycles(edges) == {frozenset({a, b, c})}
    assert module_cycles({edge: edges[edge] for edge in [(a, b), (b, c)]}) == set()
