"""`specbench serve`: an OpenAI-compatible HTTP server (FastAPI + uvicorn) over the embedded engine."""

from specbench.serve.config import ServeConfig
from specbench.serve.server import RunningServer, serve, start_server

__all__ = ["RunningServer", "ServeConfig", "serve", "start_server"]
