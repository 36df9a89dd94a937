"""Optional parts of specbench and the pip extra each needs: one declaration, read by the commands that need
them (a missing extra is one clear error naming the pip command) and by tests/test_declared_imports.py."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from specbench.errors import SpecbenchError

DISTRIBUTION = "specbench-cli"  # the PyPI name (pyproject's [project] name)


@dataclass(frozen=True)
class Extra:
    name: str  # key in pyproject's [project.optional-dependencies]
    modules: tuple[str, ...]  # top-level modules it provides
    packages: tuple[str, ...]  # specbench subpackages that import them at module level: import only after require()
    purpose: str


EXTRAS = {
    "serve": Extra("serve", ("fastapi", "starlette", "uvicorn"), ("specbench.serve",), "`specbench serve`"),
    # imported inside functions only (grammar/library.py, grammar/conformance.py): specbench.grammar loads without it
    "grammar": Extra("grammar", ("llguidance", "jsonschema"), (), "grammar-constrained decoding (response_format, "
                     "regex, tools)"),
}


def require(name: str) -> None:
    """Raise a SpecbenchError naming the pip command when a module of the extra `name` is missing."""
    extra = EXTRAS[name]
    missing = [m for m in extra.modules if _find(m) is None]
    if missing:
        raise SpecbenchError(f"{extra.purpose} needs {', '.join(missing)}: pip install '{DISTRIBUTION}[{name}]'")


def is_installed(name: str) -> bool:
    """Whether every module of the extra `name` is importable (what needs a missing one is skipped, saying so)."""
    return all(_find(m) is not None for m in EXTRAS[name].modules)


def installed_extras() -> frozenset[str]:
    return frozenset(name for name in EXTRAS if is_installed(name))


def _find(module: str):
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):  # sys.modules[module] is None, or a broken install
        return None
