"""The logprobs stage's measurements: per prompt, greedy output tokens with their logprob and top-n, and the prompt
tokens' logprobs, from an embedded engine (its own LLM, k = 0 or k), a running server (--base-url) or a server the
stage launches from --server-cmd (the sweep's servers are stopped by then), all read into ServerTokenLogprob.

The gate's sweep does not record logprobs (they cost a device->host copy per step): the stage asks again, for the
same first-turn prompts and budget, with logprobs on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from specbench.backends.server_logprobs import (
    MalformedLogprobs,
    ServerTokenLogprob,
    parse_logprobs,
    parse_prompt_logprobs,
)
from specbench.runs.sweep_config import SweepConfig
from specbench.runtime.hooks import EngineFault
from specbench.verification.first_turns import first_turns

TOP_N = 5  # top-n asked for each output and prompt token (OpenAI's completions allow up to 5)


@dataclass(frozen=True)
class LogprobsSample:
    sample_id: str
    output: tuple[ServerTokenLogprob, ...]  # [num_output_tokens]
    prompt: tuple[ServerTokenLogprob | None, ...] | None  # [num_prompt_tokens] (the first None); None: not exposed


@dataclass(frozen=True)
class LogprobsRun:
    """One side's measurements, or why there are none (a server that does not expose logprobs)."""

    label: str  # "k=0", "k=3", "k=2 server (no k = 0 run)"
    samples: tuple[LogprobsSample, ...] | None
    missing: str = ""  # why samples is None
    # responses whose logprobs do not hold together (lists of unequal length, fewer entries than tokens): the stage
    # fails on them; they are left out of `samples`, which would compare only what happened to be sent
    malformed: tuple[str, ...] = ()


def embedded_logprobs(config: SweepConfig, num_steps: int, fault: EngineFault | None = None) -> LogprobsRun:
    """The embedded engine at k = num_steps (bent by `fault`, the run's --inject), or its clean target alone at
    k = 0 (`fault` must be None then)."""
    from specbench import LLM

    engine = config.engine
    if num_steps == 0:
        if fault is not None:
            raise ValueError("the k = 0 logprobs reference is the clean target")
        engine = dataclasses.replace(engine, method="none", draft=None, max_num_steps=0)
    else:
        engine = dataclasses.replace(engine, max_num_steps=num_steps)
    llm = LLM(engine, fault=fault)
    turns = first_turns(config, llm.tokenizer, tokenize=True).turns
    params = [dataclasses.replace(t.params, temperature=0.0, logprobs=TOP_N, prompt_logprobs=TOP_N) for t in turns]
    outputs = llm.generate([list(t.token_ids) for t in turns], params)

    def text(token_id: int) -> str:
        return llm.tokenizer.decode([token_id], skip_special_tokens=False)

    def entry(e) -> ServerTokenLogprob:
        return ServerTokenLogprob(text(e.token_id), e.logprob, tuple((text(t), lp) for t, lp in e.top), e.token_id)

    samples = tuple(LogprobsSample(t.sample.sample_id, tuple(entry(e) for e in o.logprobs or ()),
                                   tuple(None if e is None else entry(e) for e in o.prompt_logprobs or ()))
                    for t, o in zip(turns, outputs))
    return LogprobsRun(f"k={num_steps}", samples)


def server_logprobs(config: SweepConfig, label: str) -> LogprobsRun:
    """Greedy /v1/completions with `logprobs` and vLLM's `prompt_logprobs` from config.base_url. A server that
    refuses prompt_logprobs is asked again without; one that sends no logprobs gives a run without samples."""
    from specbench.backends.credentials import api_key_from_env, auth_headers
    from specbench.backends.deadline import DeadlineClient, ServerAnswerError
    from specbench.backends.openai_backend import OpenAIBackend

    backend = OpenAIBackend(config)
    turns = first_turns(config, backend.tokenizer, tokenize=False).turns
    client = DeadlineClient(backend.root, auth_headers(api_key_from_env(config.api_key_env)))
    model, timeout = backend.model, backend.timeout_s
    backend.close()
    samples, malformed = [], []
    is_prompt_asked = True
    for turn in turns:
        body = {"model": model, "prompt": turn.prompt.text, "max_tokens": turn.params.max_tokens,
                "temperature": 0.0, "logprobs": TOP_N, "stream": False}
        if turn.params.stop:
            body["stop"] = list(turn.params.stop)
        try:
            answer = client.post("/v1/completions", timeout, json_body={**body, "prompt_logprobs": TOP_N}
                                 if is_prompt_asked else body)
            if is_prompt_asked and answer.status_code == 400:  # not vLLM's extension: ask without it
                is_prompt_asked = False
                answer = client.post("/v1/completions", timeout, json_body=body)
            answer.raise_for_status()
            doc = answer.json()
        except (ServerAnswerError, ValueError) as err:
            return LogprobsRun(label, None, f"the logprobs request failed: {err}")
        choices = doc.get("choices") if isinstance(doc, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        try:
            output = parse_logprobs(choice)
            short = None if output is None else _fewer_than_generated(output, doc)
            if short:
                raise MalformedLogprobs(short)
        except MalformedLogprobs as err:
            malformed.append(f"sample {turn.sample.sample_id}: {err}")
            continue
        if output is None:
            return LogprobsRun(label, None, "the server returns no logprobs (`logprobs` in /v1/completions)")
        prompt = parse_prompt_logprobs(choice) or parse_prompt_logprobs(doc)
        samples.append(LogprobsSample(turn.sample.sample_id, tuple(output), None if prompt is None else tuple(prompt)))
    return LogprobsRun(label, tuple(samples), malformed=tuple(malformed))


def _fewer_than_generated(output: list[ServerTokenLogprob], doc: dict) -> str | None:
    """Why the logprobs cover fewer tokens than the usage says were generated (one spared: an end-of-sequence
    token a server may count without listing), else None."""
    usage = doc.get("usage") if isinstance(doc, dict) else None
    generated = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(generated, int) and not isinstance(generated, bool) and len(output) < generated - 1:
        return f"logprobs for {len(output)} tokens, usage.completion_tokens {generated}"
    return None


def launched_logprobs(config: SweepConfig, num_steps: int, log_dir: Path) -> LogprobsRun:
    """--server-cmd: launch the server of num_steps again (its log: <run_dir>/servers/logprobs-k<k>.log), ask, stop."""
    from specbench.backends.launching_backend import start_server

    log_dir.mkdir(parents=True, exist_ok=True)
    server = start_server(config, num_steps, log_dir / f"logprobs-k{num_steps}.log")
    try:
        return server_logprobs(dataclasses.replace(config, base_url=server.url, server_cmd=None,
                                                   server_baseline_cmd=None), f"k={num_steps}")
    finally:
        server.stop()
