"""Every third-party module imported by the package is declared in pyproject.toml: in `dependencies` when the
import runs on module import, in `dependencies` or an extra when it is guarded (inside a function, under
`try: ... except ImportError`, or under `if TYPE_CHECKING:`), in its extra when the importing subpackage belongs
to one (specbench.extras: imported only after the command checked the extra). A fresh install then never fails
on an import."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from specbench.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("specbench",)  # every product folder lives under specbench/ (tests/test_no_shadowing.py)
# Modules not installed in the test environment (so packages_distributions cannot map them) -> distribution.
NOT_INSTALLED_HERE = {"flashinfer": "flashinfer-python", "llguidance": "llguidance", "fla": "fla-core"}
GUARD_EXCEPTIONS = {"ImportError", "ModuleNotFoundError", "Exception"}


@dataclass(frozen=True)
class ImportSite:
    module: str  # top-level module name, e.g. "scipy"
    path: str  # file relative to the repo root
    line: int
    is_guarded: bool
    extra: str | None = None  # the extra owning the importing subpackage (specbench.extras), when one does


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def _is_guard(node: ast.AST, child: ast.AST) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    if isinstance(node, ast.Try) and child in node.body:
        caught = set()
        for handler in node.handlers:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {t.id for t in types if isinstance(t, ast.Name)}
        return bool(caught & GUARD_EXCEPTIONS)
    if isinstance(node, ast.If) and child in node.body:
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    return False


def _dotted(relative: Path) -> str:
    parts = relative.with_suffix("").parts
    return ".".join(parts if parts[0] == "specbench" else ("specbench", *parts))


def _owning_extra(relative: Path, module: str) -> str | None:
    dotted = _dotted(relative)
    for extra in EXTRAS.values():
        is_inside = any(dotted == p or dotted.startswith(p + ".") for p in extra.packages)
        if is_inside and module in extra.modules:
            return extra.name
    return None


def _sites_in(path: Path) -> list[ImportSite]:
    tree = ast.parse(path.read_text(), filename=str(path))
    relative = path.relative_to(ROOT)
    sites: list[ImportSite] = []

    def visit(node: ast.AST, is_guarded: bool) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top != "specbench":
                sites.append(ImportSite(top, str(relative), node.lineno, is_guarded, _owning_extra(relative, top)))
        for child in ast.iter_child_nodes(node):
            visit(child, is_guarded or _is_guard(node, child))

    visit(tree, False)
    return sites


def import_sites() -> list[ImportSite]:
    return [site for d in SOURCE_DIRS for path in sorted((ROOT / d).rglob("*.py")) for site in _sites_in(path)]


@cache
def _installed() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distribution_of(module: str) -> str:
    mapping = _installed()
    if module in mapping:
        return _normalize(mapping[module][0])
    assert module in NOT_INSTALLED_HERE, (
        f"cannot tell which distribution provides {module!r}: install it or add it to NOT_INSTALLED_HERE")
    return _normalize(NOT_INSTALLED_HERE[module])


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(distributions in `dependencies`, extra -> its distributions)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_requirement_name(r) for r in project["dependencies"]}
    extras = {name: {_requirement_name(r) for r in reqs} for name, reqs in project["optional-dependencies"].items()}
    return base, extras


def undeclared(sites: list[ImportSite]) -> list[str]:
    base, extras = declared()
    missing = []
    for site in sites:
        dist = distribution_of(site.module)
        if site.extra is not None:
            allowed, where = extras.get(site.extra, set()), f"the {site.extra!r} extra"
        elif site.is_guarded:
            allowed, where = base.union(*extras.values()), "dependencies or an extra"
        else:
            allowed, where = base, "dependencies"
        if dist not in allowed:
            missing.append(f"{site.path}:{site.line} imports {site.module} ({dist}): declare it in {where}")
    return missing


def test_every_third_party_import_is_declared():
    sites = import_sites()
    assert {"torch", "numpy"} <= {s.module for s in sites}  # the walk sees the package
    missing = undeclared(sites)
    assert not missing, "\n".join(missing)


def test_guards_are_recognised(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    source = tmp_path / "mod.py"
    source.write_text(
        "import numpy\n"
        "try:\n    import gguf\nexcept ImportError:\n    gguf = None\n"
        "def f():\n    import accelerate\n"
        "if TYPE_CHECKING:\n    import pandas\n"
        "from . import sibling\nimport os\n")
    sites = {s.module: s.is_guarded for s in _sites_in(source)}
    assert sites == {"numpy": False, "gguf": True, "accelerate": True, "pandas": True}


def test_every_extra_of_specbench_extras_is_declared_with_its_modules():
    _, extras = declared()
    for extra in EXTRAS.values():
        assert {distribution_of(m) for m in extra.modules} <= extras[extra.name], extra
        assert {distribution_of(m) for m in extra.modules} <= extras["test"]  # CI tests every optional part


def test_an_unguarded_import_of_an_extra_only_package_is_reported():
    base, extras = declared()
    assert "gguf" in extras["gguf"] and "gguf" not in base
    assert undeclared([ImportSite("fastapi", "specbench/serve/app.py", 1, False, "serve")]) == []
    assert undeclared([ImportSite("fastapi", "specbench/bench/x.py", 1, False)]) == [
        "specbench/bench/x.py:1 imports fastapi (fastapi): declare it in dependencies"]
    assert undeclared([ImportSite("gguf", "x.py", 1, is_guarded=True)]) == []
    assert undeclared([ImportSite("gguf", "x.py", 1, is_guarded=False)]) == [
        "x.py:1 imports gguf (gguf): declare it in dependencies"]
