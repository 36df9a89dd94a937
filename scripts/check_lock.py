"""Do the dependency locks (lock/*.txt, made by scripts/lock.sh) belong to this pyproject.toml?

Each lock's header carries a fingerprint of what it was resolved from: pyproject's dependencies, extras,
requires-python and build requirements, and lock/*.in. A lock whose fingerprint differs, or that lacks a package
pyproject asks for, was made from another pyproject: one line says so and the exit status is 1.
Standard library only: setup runs it before any virtual environment exists.

    python3 scripts/check_lock.py requirements.txt requirements-demo.txt
    python3 scripts/check_lock.py --fingerprint
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = re.compile(r"^# pyproject-deps-sha256: ([0-9a-f]{64})$", re.M)
EXTRAS = re.compile(r"^# Locked by .*; extras: (.*)\.$", re.M)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", re.M)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def _applies(requirement: str) -> bool:
    """Whether a requirement's marker holds on the locked platform (CPython 3.11, Linux x86_64): only the markers
    pyproject uses are understood; an unknown one counts as applying."""
    if ";" not in requirement:
        return True
    marker = requirement.split(";", 1)[1]
    facts = {"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"}
    for key, op, value in re.findall(r"(\w+)\s*(==|!=)\s*['\"]([^'\"]*)['\"]", marker):
        if key in facts and (facts[key] == value) != (op == "=="):
            return False
    return True


def fingerprint(root: Path = ROOT) -> str:
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    project = pyproject["project"]
    inputs = {
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "requires-python": project.get("requires-python"),
        "build-requires": pyproject.get("build-system", {}).get("requires", []),
        "lock-inputs": {p.name: p.read_text() for p in sorted((root / "lock").glob("*.in"))},
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def problems(lock: Path, root: Path = ROOT) -> list[str]:
    if not lock.is_file():
        return [f"{lock} is missing"]
    text = lock.read_text()
    header = HEADER.search(text)
    if header is None:
        return [f"{lock} has no pyproject fingerprint (not made by scripts/lock.sh)"]
    if header.group(1) != fingerprint(root):
        return [f"{lock} was locked from another pyproject.toml (its dependencies, extras or lock/*.in changed since)"]
    if lock.name == "requirements-model.txt":  # the model package alone, not pyproject's dependencies
        return []
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    extras_line = EXTRAS.search(text)
    extras = [] if extras_line is None or extras_line.group(1) == "none" else extras_line.group(1).split()
    wanted = [r for r in project.get("dependencies", []) if _applies(r)]
    for extra in extras:
        wanted += [r for r in project.get("optional-dependencies", {}).get(extra, []) if _applies(r)]
    pinned = {_normalize(name) for name in PIN.findall(text)}
    missing = sorted({_requirement_name(r) for r in wanted} - pinned)
    return [f"{lock} lacks {', '.join(missing)} that pyproject.toml asks for"] if missing else []


def main(argv: list[str]) -> int:
    if argv == ["--fingerprint"]:
        print(fingerprint())
        return 0
    found = [problem for lock in argv for problem in problems(Path(lock))]
    if found:
        print(f"error: {found[0]}: run `bash scripts/lock.sh` and commit requirements*.txt", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
