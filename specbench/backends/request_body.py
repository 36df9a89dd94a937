"""The OpenAI-compatible request for one turn: chat (messages) or completions (text / token ids), sampling explicit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.backends.constraint_body import constraint_fields
from specbench.runs.turns import Turn

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True)
class HttpRequest:
    path: str  # CHAT_PATH | COMPLETIONS_PATH
    body: dict[str, Any]  # the JSON payload as sent


def build_request(turn: Turn, model: str, *, chat: bool, dialect: str = "openai") -> HttpRequest:
    """`chat`: send the conversation (the server applies its chat template); else the rendered text, or the
    token ids of a random-token prompt. `dialect`: the server adapter's name, for how an output constraint is sent
    (backends/constraint_body.py).

    Every sampling parameter is sent explicitly, never left to server defaults. Streaming asks for usage in the
    last chunk (`include_usage`) and in every chunk (`continuous_usage_stats`, a vLLM/SGLang/specbench extension
    that gives exact tokens per chunk; other servers ignore or refuse it).
    """
    params = turn.params
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "seed": params.seed,
        "stop": list(params.stop),
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if params.top_k != -1:
        body["top_k"] = params.top_k  # extension (vLLM, SGLang); omitted when off so plain OpenAI servers accept it
    if params.ignore_eos:
        body["ignore_eos"] = True  # extension; only the random workload sets it
    if params.prompt_logprobs is not None:
        body["prompt_logprobs"] = params.prompt_logprobs  # extension (vLLM on both routes; specbench serve: completions)
    body.update(constraint_fields(params.grammar, dialect))
    prompt = turn.prompt
    if chat and prompt.messages:
        body["messages"] = [{"role": m.role, "content": m.content} for m in prompt.messages]
        if params.logprobs is not None:
            body["logprobs"], body["top_logprobs"] = True, params.logprobs
        return HttpRequest(CHAT_PATH, body)
    body["prompt"] = list(prompt.token_ids) if prompt.token_ids is not None else prompt.text
    if params.logprobs is not None:
        body["logprobs"] = params.logprobs
    return HttpRequest(COMPLETIONS_PATH, body)
