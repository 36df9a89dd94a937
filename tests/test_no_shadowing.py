"""No product folder is importable as a top-level package of another distribution's name.

Python puts the current directory (or the script's folder) first on sys.path: pytest here (`pythonpath = ["."]`),
`python -m specbench` from the repo root, a notebook started in the root or in notebooks/, `python scripts/x.py`.
A folder there with an __init__.py (or a module file) then wins over any installed package of the same name:
transformers >= 5.25 imports Hugging Face's `kernels`, and a top-level `kernels/` of ours broke every model load.
So every product folder lives under specbench/ (pyproject's packages.find), and these tests check the rule both
ways: statically (nothing importable in those folders takes an installed distribution's name) and for real (from
the root and from notebooks/, transformers.activations imports HF's `kernels` and a tiny model loads)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folders that land first on sys.path in some documented use (the root, notebooks run there, scripts run as files).
PATH_HEADS = (ROOT, ROOT / "notebooks", ROOT / "scripts")
# The only regular packages at the root: the product, and the tests' own helpers (`tests.support.*`).
ROOT_PACKAGES = {"specbench", "tests"}


def importable_names(folder: Path) -> dict[str, str]:
    """Top-level names a `folder` on sys.path would provide ahead of site-packages -> what provides it.
    Folders without an __init__.py are left out: a namespace package never wins over an installed regular one."""
    found = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and (entry / "__init__.py").is_file():
            found[entry.name] = "package"
        elif entry.is_file() and entry.suffix in (".py", ".so", ".pyc") and entry.name != "__init__.py":
            found[entry.name.split(".")[0]] = "module"
    return found


def test_the_product_ships_from_specbench_alone():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in setuptools, "a mapped folder outside specbench/ would be importable top-level"
    assert setuptools["packages"]["find"]["include"] == ["specbench", "specbench.*"]
    assert set(name for name, kind in importable_names(ROOT).items() if kind == "package") == ROOT_PACKAGES


def test_nothing_on_the_path_heads_takes_an_installed_name():
    installed = importlib.metadata.packages_distributions()
    clashes = [f"{folder.relative_to(ROOT.parent)}/{name} ({kind}) shadows {installed[name]}"
               for folder in PATH_HEADS for name, kind in importable_names(folder).items()
               if name in installed and set(installed[name]) != {"specbench-cli"}]
    assert not clashes, clashes


def test_the_static_check_would_see_a_clash(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "tool.py").write_text("")
    assert importable_names(tmp_path) == {"kernels": "package", "tool": "module"}


LOAD_A_TINY_MODEL = textwrap.dedent("""
    import sys, tempfile
    import kernels, transformers.activations
    assert "site-packages" in kernels.__file__, kernels.__file__
    from tests.support.tiny_models import build_tiny_model
    from specbench import LLM, SamplingParams
    with tempfile.TemporaryDirectory() as out:
        build_tiny_model(out)
        llm = LLM(out, method="none", device="cpu", dtype="fp32", kv_cache_gb=0.01)
        tokens = llm.generate([[5, 6, 7]], SamplingParams(max_tokens=3, temperature=0.0))[0].output_token_ids
    assert len(tokens) == 3, tokens
    print("ok", kernels.__file__)
""")


@pytest.mark.parametrize("cwd", ["", "notebooks"])
def test_hf_kernels_and_a_model_load_from_the_checkout(cwd):
    try:
        importlib.metadata.version("kernels")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail("Hugging Face's `kernels` is not installed: requirements.txt brings it (transformers >= 5.25)")
    # `python -c` puts the working directory first on sys.path, as `python -m specbench` and a notebook do; the
    # root is added for `tests.support` when running from notebooks/ (after the working directory, as pytest would).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LOAD_A_TINY_MODEL], cwd=ROOT / cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("ok")


@pytest.mark.parametrize("cwd", ["", "notebooks"])
def test_the_cli_starts_from_the_checkout(cwd):
    done = subprocess.run([sys.executable, "-m", "specbench", "--help"], cwd=ROOT / cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sweep" in done.stdout
