"""OpenAI request bodies -> prompt token ids and SamplingParams (bad requests raise BadRequest: HTTP 400)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.errors import SpecbenchError
from specbench.sampling_params import SamplingParams
from specbench.workloads.base import Message
from specbench.workloads.chat import apply_chat_template

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
ROLES = ("system", "user", "assistant")


class BadRequest(Exception):
    """The request is malformed or asks for something unsupported."""


@dataclass(frozen=True)
class GenerationRequest:
    model: str | None
    prompt_token_ids: tuple[int, ...]  # [num_prompt_tokens]
    params: SamplingParams
    is_stream: bool
    include_usage: bool  # stream_options.include_usage: a final usage chunk
    continuous_usage: bool  # stream_options.continuous_usage_stats: cumulative usage in every chunk


def parse_completion(body: Any, tokenizer, max_model_len: int) -> GenerationRequest:
    body = _object(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        token_ids = _encode(tokenizer, prompt, add_special_tokens=True)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        token_ids = tuple(prompt)
    else:
        raise BadRequest("'prompt' must be a string or a list of token ids (one prompt per request)")
    if body.get("echo") or body.get("logprobs") not in (None, False):
        raise BadRequest("echo and logprobs are not supported")
    return _request(body, token_ids, body.get("max_tokens", COMPLETIONS_DEFAULT_MAX_TOKENS), max_model_len)


def parse_chat(body: Any, tokenizer, max_model_len: int) -> GenerationRequest:
    body = _object(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    parsed = tuple(_message(m) for m in messages)
    if body.get("logprobs"):
        raise BadRequest("logprobs are not supported")
    if tokenizer is None:
        raise BadRequest("this model has no tokenizer: chat needs one")
    try:
        text = apply_chat_template(tokenizer, parsed)
    except SpecbenchError as err:
        raise BadRequest(str(err)) from None
    token_ids = _encode(tokenizer, text, add_special_tokens=False)  # the template rendered BOS & co already
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return _request(body, token_ids, max_tokens, max_model_len)


def _request(body: dict, token_ids: tuple[int, ...], max_tokens: Any, max_model_len: int) -> GenerationRequest:
    if body.get("n", 1) != 1:
        raise BadRequest("only n = 1 is supported")
    if max_tokens is None:
        max_tokens = max(max_model_len - len(token_ids), 1)
    stop = body.get("stop")
    if stop is None:
        stop = ()
    elif isinstance(stop, str):
        stop = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stop = tuple(s for s in stop if s)
    else:
        raise BadRequest("'stop' must be a string or a list of strings")
    top_k = body.get("top_k")
    try:
        params = SamplingParams(
            temperature=float(_number(body, "temperature", 1.0)),
            top_p=float(_number(body, "top_p", 1.0)),
            top_k=-1 if top_k in (None, 0, -1) else _integer(top_k, "top_k"),
            max_tokens=_integer(max_tokens, "max_tokens"),
            seed=None if body.get("seed") is None else _integer(body["seed"], "seed"),
            stop=stop,
            ignore_eos=bool(body.get("ignore_eos", False)),
        )
    except SpecbenchError as err:
        raise BadRequest(str(err)) from None
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object")
    is_stream = bool(body.get("stream", False))
    return GenerationRequest(
        model=body.get("model"),
        prompt_token_ids=token_ids,
        params=params,
        is_stream=is_stream,
        include_usage=is_stream and bool(options.get("include_usage", False)),
        continuous_usage=is_stream and bool(options.get("continuous_usage_stats", False)),
    )


def _object(body: Any) -> dict:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def _message(message: Any) -> Message:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise BadRequest(f"each message needs a role in {', '.join(ROLES)}")
    content = message.get("content")
    if isinstance(content, list):  # content parts: text only
        if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            raise BadRequest("only text content parts are supported")
        content = "".join(str(p.get("text", "")) for p in content)
    if not isinstance(content, str):
        raise BadRequest("message content must be a string")
    return Message(message["role"], content)


def _encode(tokenizer, text: str, *, add_special_tokens: bool) -> tuple[int, ...]:
    if tokenizer is None:
        raise BadRequest("this model has no tokenizer: send token ids")
    ids = tuple(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
    if not ids:
        raise BadRequest("empty prompt")
    return ids


def _number(body: dict, name: str, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"'{name}' must be a number")
    return value


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"'{name}' must be an integer")
    return value
