"""The dependency locks belong to this pyproject.toml, pin every package with hashes, and a stale one is refused
in one line (scripts/check_lock.py, which scripts/setup.sh runs before installing anything)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ("requirements.txt", "requirements-demo.txt", "requirements-model.txt")  # at the repo root


def _check_lock():
    spec = importlib.util.spec_from_file_location("check_lock", ROOT / "scripts" / "check_lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "lock", tmp_path / "lock")  # the lock inputs (*.in), part of the fingerprint
    for name in LOCKS:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_committed_locks_belong_to_this_pyproject():
    check = _check_lock()
    assert [p for name in LOCKS for p in check.problems(ROOT / name)] == []


def test_every_locked_package_is_exact_and_hashed():
    for name in LOCKS:
        text = (ROOT / name).read_text()
        entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
        pins = [e for e in entries if re.match(r"[A-Za-z0-9]", e)]
        assert pins, name
        for entry in pins:
            assert re.match(r"[A-Za-z0-9._-]+==\S+ \\\n", entry), entry.splitlines()[0]
            assert "--hash=sha256:" in entry, entry.splitlines()[0]


def test_the_install_locks_agree_on_versions():
    def pins(name: str) -> dict[str, str]:
        return dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", (ROOT / name).read_text(), re.M))

    test, demo = pins("requirements.txt"), pins("requirements-demo.txt")
    assert demo.keys() <= test.keys()
    assert {k: v for k, v in demo.items() if test[k] != v} == {}
    assert test["torch"].endswith("+cpu")  # the CPU wheel; a CUDA build would be several GB


def test_a_changed_pyproject_is_refused(tmp_path):
    root = _copy(tmp_path)
    check = _check_lock()
    assert check.problems(root / "requirements.txt", root) == []
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"scipy",', '"scipy",\n    "rich",'))
    assert check.problems(root / "requirements.txt", root) == [
        f"{root / 'requirements.txt'} was locked from another pyproject.toml (its dependencies, extras or "
        f"lock/*.in changed since)"]


def test_a_lock_missing_a_dependency_is_refused(tmp_path):
    root = _copy(tmp_path)
    lock = root / "requirements-demo.txt"
    lock.write_text(re.sub(r"^scipy==.*?(?=^[a-z])", "", lock.read_text(), flags=re.M | re.S))
    assert _check_lock().problems(lock, root) == [f"{lock} lacks scipy that pyproject.toml asks for"]


def test_setup_refuses_a_stale_lock_in_one_line(tmp_path):
    root = _copy(tmp_path)
    (root / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "check_lock.py", root / "scripts")
    shutil.copy(ROOT / "scripts" / "setup.sh", root / "scripts")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"pandas",', '"pandas>=9",'))
    done = subprocess.run(["bash", "scripts/setup.sh", "test"], cwd=root, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable}, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: requirements.txt was locked from another pyproject.toml (its dependencies, extras or lock/*.in "
        f"changed since): run `bash scripts/lock.sh` and commit requirements*.txt"]
    assert not (root / ".venv").exists()  # refused before anything was installed
