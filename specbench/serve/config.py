"""What `specbench serve` runs: the engine, the name it serves, and optional API-key protection."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.config import EngineConfig


@dataclass(frozen=True)
class ServeConfig:
    engine: EngineConfig
    served_model_name: str | None = None  # None: the --target string, as vLLM names models
    api_key_env: str | None = None  # environment variable whose value /v1/* requests must send as a Bearer token
    log_level: str = "warning"  # uvicorn's

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.engine.target
