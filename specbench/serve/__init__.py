"""`specbench serve`: an OpenAI-compatible HTTP server (FastAPI + uvicorn) over the embedded engine.

The server names load on first use, so the pure parts of this package (text_stream, config) import without the
`serve` extra installed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunningServer", "ServeConfig", "serve", "start_server"]


def __getattr__(name: str) -> Any:
    if name == "ServeConfig":
        from specbench.serve.config import ServeConfig

        return ServeConfig
    if name in ("RunningServer", "serve", "start_server"):
        from specbench.serve import server

        return getattr(server, name)
    raise AttributeError(f"module 'specbench.serve' has no attribute {name!r}")
