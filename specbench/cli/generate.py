"""`specbench generate`: run prompts through the engine, print text and acceptance statistics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from specbench.cli import options as o


@o.engine_options()
def generate(
    prompt: Annotated[Optional[list[str]], typer.Option("--prompt", "-p", help="prompt text (repeatable)")] = None,
    prompts_file: Annotated[Optional[Path], typer.Option("--prompts-file", help="one prompt per line")] = None,
    num_steps: Annotated[int, typer.Option("--num-steps", "-k", help="draft tokens per round")] = 0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="max new tokens per prompt")] = 64,
    temperature: Annotated[float, typer.Option("--temperature")] = 0.0,
    top_p: Annotated[float, typer.Option("--top-p")] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k")] = -1,
    request_seed: Annotated[Optional[int], typer.Option("--request-seed", help="seed for sampled requests")] = None,
    chat_template: Annotated[bool, typer.Option("--chat-template", help="wrap prompts in the chat template")] = False,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos")] = False,
    max_concurrency: Annotated[int, typer.Option("--max-concurrency", help="max running requests")] = 64,
    engine: dict = None,  # the shared engine option group (options.engine_options)
    fault: object = None,  # --inject (options.engine_options): the fault applied to the engine, or None
) -> None:
    """Generate for PROMPTs and print each output with its acceptance statistics."""
    from specbench.config import EngineConfig
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
        EngineConfig(**engine, max_num_steps=num_steps, max_concurrency=max_concurrency),
        fault,
    )
    print_generation(report)
