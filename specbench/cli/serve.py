"""`specbench serve`: an OpenAI-compatible HTTP server over the embedded engine."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.serve.config import ServeConfig  # pure: imports without the `serve` extra


@o.engine_options()
def serve(
    host: Annotated[str, typer.Option("--host", help="address to bind; the default 127.0.0.1 is reachable from this "
                                      "machine only. 0.0.0.0 exposes the server to the network: set --api-key-env "
                                      "too")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on")] = 8000,
    served_model_name: Annotated[Optional[str], typer.Option("--served-model-name", help="model id clients send "
                                                             "(default: the --target string)")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="require `Authorization: Bearer "
                                                       "$VAR` on /v1/* (VAR names an environment variable). "
                                                       "Default: no authentication")] = None,
    auth_health: Annotated[bool, typer.Option("--auth-health/--no-auth-health", help="with --api-key-env, "
                                              "/health and /metrics need the key too")] = False,
    max_request_bytes: Annotated[int, typer.Option("--max-request-bytes", help="larger request bodies are "
                                                   "answered 413 unread")] = ServeConfig.max_request_bytes,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level")] = "warning",
    reasoning_end: Annotated[Optional[str], typer.Option("--reasoning-end", help="a reasoning model's "
                                                         "end-of-thinking text (e.g. '</think>'): constrained "
                                                         "answers (response_format, tools) follow their grammar "
                                                         "after it")] = None,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="draft tokens per round")] = 0,
    eagle_topk: Annotated[int, typer.Option("--eagle-topk", help="tree drafts: children kept per draft node (1 = "
                                            "chains; methods draft, eagle, eagle3, mtp)")] = 1,
    num_draft_tokens: Annotated[Optional[int], typer.Option("--num-draft-tokens", help="tree drafts: drafted tokens "
                                                            "per round, the root excluded (default: every node "
                                                            "--num-steps and --eagle-topk give)")] = None,
    max_concurrency: Annotated[int, typer.Option("--max-concurrency", help="max running requests")] = 64,
    engine: dict = None,  # the shared engine option group (options.engine_options)
    fault: object = None,  # --inject (options.engine_options): the fault applied to the engine, or None
) -> None:
    """Serve /v1/models, /v1/completions, /v1/chat/completions (streaming), /metrics, /health, /version.

    Binds 127.0.0.1 (this machine only) unless --host says otherwise.
    No authentication unless --api-key-env is set.
    Request fields are validated (400 naming the field); bodies past --max-request-bytes get 413.
    A request the engine fails on is answered 500 alone; the others go on."""
    from specbench.extras import require

    require("serve")  # before anything loads: fastapi & co are the `serve` extra
    from specbench.config import EngineConfig
    from specbench.serve import serve as run_server
    from specbench.speculation.draft_shape import DraftShape

    config = EngineConfig(**engine, max_num_steps=num_steps, max_concurrency=max_concurrency)
    shape = DraftShape(eagle_topk, num_draft_tokens if eagle_topk > 1 else None)
    run_server(ServeConfig(config, served_model_name, api_key_env, log_level, max_request_bytes=max_request_bytes,
                           is_probe_auth=auth_health, reasoning_end=reasoning_end, draft_shape=shape), host=host,
               port=port, fault=fault)
