"""fastapi/uvicorn/pydantic are the `serve` extra: the CLI imports without them, and `specbench serve` then ends
in one `error:` line naming the pip command (exit 2) before loading anything."""

from __future__ import annotations

import subprocess
import sys

from specbench.extras import EXTRAS

BLOCK = "import sys\nfor m in {modules!r}: sys.modules[m] = None  # `import m` raises ImportError\n"


def _run(code: str) -> subprocess.CompletedProcess:
    modules = list(EXTRAS["serve"].modules)
    return subprocess.run([sys.executable, "-c", BLOCK.format(modules=modules) + code], capture_output=True,
                          text=True, timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


def test_the_cli_imports_and_serve_names_the_extra_without_fastapi():
    result = _run("sys.argv = ['specbench', 'serve', '--target', 'does-not-matter']\n"
                  "import specbench.cli.app\n"
                  "specbench.cli.app.main()\n")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: `specbench serve` needs fastapi, starlette, uvicorn: pip install 'specbench-cli[serve]'"]
    assert "Traceback" not in result.stderr
