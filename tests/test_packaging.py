"""pyproject lists every subpackage (the list is explicit because kernels/ and workloads/ are mapped)."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "specbench").rglob("__init__.py")
    } | {"specbench.kernels", "specbench.workloads"}
    assert found <= listed, f"add to pyproject packages: {sorted(found - listed)}"
    mapped = project["tool"]["setuptools"]["package-dir"]
    assert mapped["specbench.kernels"] == "kernels" and mapped["specbench.workloads"] == "workloads"


def test_kernels_is_not_a_top_level_module():
    import importlib.util

    spec = importlib.util.find_spec("kernels")
    assert spec is None or "specbench" not in str(spec.origin)
