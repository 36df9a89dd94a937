"""`specbench serve`: an OpenAI-compatible HTTP server over the embedded engine."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.app import app


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on")] = 8000,
    served_model_name: Annotated[Optional[str], typer.Option("--served-model-name", help="model id clients send "
                                                             "(default: the --target string)")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="require `Authorization: Bearer "
                                                       "$VAR` on /v1/* (VAR names an environment variable)")] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level")] = "warning",
    target: o.Target = "default",
    draft: o.Draft = None,
    method: o.Method = "none",
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="draft tokens per round")] = 0,
    dtype: o.Dtype = "auto",
    device: o.Device = "auto",
    load_format: o.LoadFormat = "auto",
    allow_pickle: o.AllowPickle = False,
    tokenizer: o.Tokenizer = None,
    kv_cache_gb: o.KvCacheGb = None,
    gpu_memory_utilization: o.GpuMemUtil = 0.85,
    block_size: o.BlockSize = 16,
    max_concurrency: o.MaxConcurrency = 64,
    max_model_len: o.MaxModelLen = None,
    max_num_batched_tokens: Annotated[int, typer.Option("--max-num-batched-tokens")] = 8192,
    ngram_min: o.NgramMin = 1,
    ngram_max: o.NgramMax = 4,
    eagle_aux_layer_ids: o.EagleAuxLayerIds = None,
    eagle_aux_convention: o.EagleAuxConvention = "auto",
    enforce_eager: o.EnforceEager = False,
    seed: o.Seed = 0,
) -> None:
    """Serve /v1/models, /v1/completions, /v1/chat/completions (streaming), /metrics, /health, /version."""
    from specbench.extras import require

    require("serve")  # before anything loads: fastapi & co are the `serve` extra
    from specbench.config import EngineConfig
    from specbench.serve import ServeConfig
    from specbench.serve import serve as run_server

    engine = EngineConfig(
        target=target, method=method, draft=draft, num_steps=num_steps, dtype=dtype, device=device,
        load_format=load_format, allow_pickle=allow_pickle, tokenizer=tokenizer, block_size=block_size,
        kv_cache_gb=kv_cache_gb, gpu_memory_utilization=gpu_memory_utilization, max_concurrency=max_concurrency,
        max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len, ngram_min=ngram_min,
        ngram_max=ngram_max, eagle_aux_layer_ids=o.parse_layer_ids(eagle_aux_layer_ids),
        eagle_aux_convention=eagle_aux_convention, enforce_eager=enforce_eager, seed=seed,
    )
    run_server(ServeConfig(engine, served_model_name, api_key_env, log_level), host=host, port=port)
