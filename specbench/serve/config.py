"""What `specbench serve` runs: the engine, the name it serves, optional API-key protection and request limits."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.config import EngineConfig
from specbench.errors import SpecbenchError
from specbench.speculation.draft_shape import CHAIN, DraftShape


@dataclass(frozen=True)
class ServeConfig:
    engine: EngineConfig
    served_model_name: str | None = None  # None: the --target string, as vLLM names models
    api_key_env: str | None = None  # environment variable whose value /v1/* requests must send as a Bearer token
    log_level: str = "warning"  # uvicorn's
    # Bodies past this are answered 413 unread. 2 MiB holds a 128k-token context as text or as token ids.
    max_request_bytes: int = 2 * 1024 * 1024
    is_probe_auth: bool = False  # /health and /metrics need the API key too (off: load balancers and scrapers)
    # A reasoning model's end-of-thinking text ("</think>"): a constrained request's grammar starts after it.
    reasoning_end: str | None = None
    # The draft tree of every round (--eagle-topk, --num-draft-tokens); CHAIN: k drafts in a row.
    draft_shape: DraftShape = CHAIN

    def __post_init__(self) -> None:
        if self.max_request_bytes < 1:
            raise SpecbenchError(f"--max-request-bytes must be >= 1, got {self.max_request_bytes}")

    @property
    def model_name(self) -> str:
        return self.served_model_name or self.engine.target
