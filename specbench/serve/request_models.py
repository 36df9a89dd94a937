"""Typed OpenAI request bodies accepted by `specbench serve` (pydantic, strict: no string-to-number coercion).

Unknown fields are refused (`extra="forbid"`): a field the engine cannot honour would otherwise be silently
ignored and change what the client believes it measured. Fields in NEUTRAL_VALUES are accepted only at values
that change nothing (clients often send the defaults explicitly); `user` is accepted and unused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo

from specbench.sampling_params import sampling_value_error

# Bounds on what one request may ask for (the body's size is bounded before parsing: ServeConfig.max_request_bytes).
MAX_STOP_STRINGS = 16  # each is matched against the decoded tail at every step
MAX_STOP_CHARS = 1024
MAX_MESSAGES = 1024


def _representable(name: str, *, off: tuple[int, ...] = ()) -> AfterValidator:
    """A sampling value the engine can represent (sampling_params.SAMPLING_LIMITS); `off`: HTTP spellings of
    "disabled" that the protocol maps before building SamplingParams."""

    def check(value, info: ValidationInfo):
        if value is not None and value not in off:
            message = sampling_value_error(name, value, label=info.field_name)
            if message is not None:
                raise ValueError(message)
        return value

    return AfterValidator(check)


StopString = Annotated[str, StringConstraints(max_length=MAX_STOP_CHARS)]


class _Body(BaseModel):
    # allow_inf_nan: Python's json accepts NaN, Infinity and 1e999 (inf); no field of a request may be non-finite.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


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
    max_tokens: Annotated[int | None, _representable("max_tokens")] = None
    temperature: Annotated[float | None, _representable("temperature")] = None
    top_p: Annotated[float | None, _representable("top_p")] = None
    # extension (vLLM, SGLang); 0 and -1 mean off; at most the vocabulary's size (checked by the protocol)
    top_k: Annotated[int | None, _representable("top_k", off=(0,))] = None
    seed: Annotated[int | None, _representable("seed")] = None
    stop: StopString | Annotated[list[StopString], Field(max_length=MAX_STOP_STRINGS)] | None = None
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
    logprobs: Annotated[int | None, _representable("logprobs")] = None  # top-n per output token
    prompt_logprobs: Annotated[int | None, _representable("prompt_logprobs")] = None  # extension (vLLM)
    best_of: int | None = None
    suffix: str | None = None


class ChatCompletionRequest(GenerationBody):
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    max_completion_tokens: Annotated[int | None, _representable("max_tokens")] = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int | None, _representable("logprobs")] = None  # needs logprobs: true
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None  # one call per response (a tool-call grammar makes exactly one)
    response_format: dict[str, Any] | None = None  # text, json_object, json_schema (serve/structured_request.py)
    structured_outputs: dict[str, Any] | None = None  # extension (vLLM): {"json": schema} or {"regex": pattern}
    functions: list[dict[str, Any]] | None = None  # deprecated form of tools
    function_call: str | dict[str, Any] | None = None


FIELD_NAMES = frozenset(name for model in (CompletionRequest, ChatCompletionRequest, ChatMessage, TextPart, StreamOptions)
                        for name in model.model_fields)

# field -> the values it may take (anything else would change the output): refused with HTTP 400 otherwise.
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "n": (1,),
    "frequency_penalty": (0.0,),
    "presence_penalty": (0.0,),
    "logit_bias": (None, {}),
    "echo": (False,),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "functions": (None, []),
    "function_call": (None, "none"),
    "parallel_tool_calls": (None, False, True),
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
