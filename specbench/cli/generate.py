"""`specbench generate`: run prompts through the engine, print text and acceptance statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli import options as o
from specbench.cli.app import app


@app.command()
def generate(
    prompt: Annotated[Optional[list[str]], typer.Option("--prompt", "-p", help="prompt text (repeatable)")] = None,
    prompts_file: Annotated[Optional[Path], typer.Option("--prompts-file", help="one prompt per line")] = None,
    target: o.Target = "default",
    draft: o.Draft = None,
    method: o.Method = "none",
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="draft tokens per round")] = 0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="max new tokens per prompt")] = 64,
    temperature: Annotated[float, typer.Option("--temperature")] = 0.0,
    top_p: Annotated[float, typer.Option("--top-p")] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k")] = -1,
    request_seed: Annotated[Optional[int], typer.Option("--request-seed", help="seed for sampled requests")] = None,
    chat_template: Annotated[bool, typer.Option("--chat-template", help="wrap prompts in the chat template")] = False,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos")] = False,
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
    ngram_min: o.NgramMin = 1,
    ngram_max: o.NgramMax = 4,
    eagle_aux_layer_ids: o.EagleAuxLayerIds = None,
    eagle_aux_convention: o.EagleAuxConvention = "auto",
    attention_backend: o.AttentionBackendOpt = "auto",
    verifier: o.VerifierOpt = "auto",
    synthetic_acceptance: o.SyntheticAcceptance = None,
    enforce_eager: o.EnforceEager = False,
    seed: o.Seed = 0,
) -> None:
    """Generate for PROMPTs and print each output with its acceptance statistics."""
    from specbench.generate import GenerateRequest, print_generation, run_generate

    report = run_generate(
        GenerateRequest(
            prompts=tuple(prompt or ()),
            prompts_file=prompts_file,
            chat_template=chat_template,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            request_seed=request_seed,
            ignore_eos=ignore_eos,
        ),
        target=target,
        draft=draft,
        method=method,
        num_steps=num_steps,
        dtype=dtype,
        device=device,
        load_format=load_format,
        allow_pickle=allow_pickle,
        tokenizer=tokenizer,
        kv_cache_gb=kv_cache_gb,
        gpu_memory_utilization=gpu_memory_utilization,
        block_size=block_size,
        max_concurrency=max_concurrency,
        max_model_len=max_model_len,
        ngram_min=ngram_min,
        ngram_max=ngram_max,
        eagle_aux_layer_ids=o.parse_layer_ids(eagle_aux_layer_ids),
        eagle_aux_convention=eagle_aux_convention,
        attention_backend=attention_backend,
        verifier=verifier,
        synthetic_acceptance=o.parse_rates(synthetic_acceptance),
        enforce_eager=enforce_eager,
        seed=seed,
    )
    print_generation(report)
