"""Re-running Triton-interpreter tests in a fresh process, for sessions where triton was imported without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def assert_passes_interpreted(*pytest_args: str) -> str:
    """Runs pytest on `pytest_args` with TRITON_INTERPRET=1 (read once, at triton's first import); returns stdout."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return result.stdout
