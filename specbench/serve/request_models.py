"""Typed OpenAI request bodies accepted by `specbench serve` (pydantic, strict: no string-to-number coercion).

Unknown fields are refused (`extra="forbid"`): a field the engine cannot honour would otherwise be silently
ignored and change what the client believes it measured. Fields in NEUTRAL_VALUES are accepted only at values
that change nothing (clients often send the defaults explicitly); `user` is accepted and unused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class StreamOptions(_Body):
    include_usage: bool = False
    continuous_usage_stats: bool = False  # vLLM/SGLang extension: cumulative usage in every chunk


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ChatMessage(_Body):
    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart]


class GenerationBody(_Body):
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None  # extension (vLLM, SGLang); 0 and -1 mean off
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # extension
    user: str | None = None  # an end-user id for abuse monitoring: no effect on the output
    n: int = 1
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None


class CompletionRequest(GenerationBody):
    prompt: str | list[int] | list[str] | list[list[int]]
    echo: bool = False
    logprobs: int | None = None
    best_of: int | None = None
    suffix: str | None = None


class ChatCompletionRequest(GenerationBody):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None  # meaningful only with tools, which are refused
    response_format: dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None  # deprecated form of tools
    function_call: str | dict[str, Any] | None = None


# field -> the values it may take (anything else would change the output): refused with HTTP 400 otherwise.
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "n": (1,),
    "frequency_penalty": (0.0,),
    "presence_penalty": (0.0,),
    "logit_bias": (None, {}),
    "echo": (False,),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "response_format": (None, {"type": "text"}),
    "functions": (None, []),
    "function_call": (None, "none"),
}


def non_neutral_fields(body: GenerationBody) -> list[str]:
    """Fields of `body` set to a value the engine cannot honour, in declaration order."""
    found = []
    for name in type(body).model_fields:
        value = getattr(body, name)
        if name in NEUTRAL_VALUES and not any(_same(value, v) for v in NEUTRAL_VALUES[name]):
            found.append(name)
    return found


def _same(value: Any, neutral: Any) -> bool:
    # bool is an int in Python: logprobs=0 (an int) must not pass as False, nor n=True as 1.
    return type(value) is type(neutral) and value == neutral if neutral is not None else value is None
