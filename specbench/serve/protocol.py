"""OpenAI request bodies -> prompt token ids and SamplingParams (bad requests raise BadRequest: HTTP 400)."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

from pydantic import ValidationError

from specbench.errors import SpecbenchError
from specbench.grammar.spec import GrammarSpec
from specbench.sampling_params import SamplingParams
from specbench.serve.structured_request import ConstraintError, grammar_of
from specbench.serve.request_models import (
    FIELD_NAMES,
    NEUTRAL_VALUES,
    ChatCompletionRequest,
    CompletionRequest,
    GenerationBody,
    non_neutral_fields,
)
from specbench.workloads.base import Message
from specbench.workloads.chat import apply_chat_template

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions (lowered to the context left)
# No request field needs more (tools' JSON schemas, which are refused anyway, nest a dozen levels); deeper bodies
# are hostile. Python's json raises RecursionError near 1000 levels, which is refused the same way.
MAX_JSON_DEPTH = 64
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins escaped pairs: what is left is lone


class BadRequest(Exception):
    """The request is malformed or asks for something unsupported; `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class GenerationRequest:
    model: str | None
    prompt_token_ids: tuple[int, ...]  # [num_prompt_tokens]
    params: SamplingParams
    is_stream: bool
    include_usage: bool  # stream_options.include_usage: a final usage chunk
    continuous_usage: bool  # stream_options.continuous_usage_stats: cumulative usage in every chunk


def parse_completion(raw: bytes, tokenizer, max_model_len: int, vocab_size: int | None = None) -> GenerationRequest:
    """`vocab_size`: the model's; None skips the checks that need it (token ids, top_k: the engine checks those)."""
    body = _validate(CompletionRequest, raw)
    prompt = body.prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        token_ids = _encode(tokenizer, prompt, add_special_tokens=True)
    elif prompt and all(isinstance(t, int) for t in prompt):
        token_ids = tuple(prompt)
        if vocab_size is not None and not 0 <= min(token_ids) <= max(token_ids) < vocab_size:
            raise BadRequest(f"'prompt': token ids must be in [0, {vocab_size})", "prompt")
    else:
        raise BadRequest("'prompt' must be a string or a list of token ids (one prompt per request)", "prompt")
    max_tokens = body.max_tokens
    if max_tokens is None:
        max_tokens = max(min(COMPLETIONS_DEFAULT_MAX_TOKENS, max_model_len - len(token_ids)), 1)
    return _request(body, token_ids, max_tokens, "max_tokens", max_model_len, vocab_size, "prompt",
                    body.logprobs, body.prompt_logprobs)


def parse_chat(raw: bytes, tokenizer, max_model_len: int, vocab_size: int | None = None,
               reasoning_end: str | None = None) -> GenerationRequest:
    """`reasoning_end`: the server's end-of-thinking text; a constrained answer's grammar starts after it."""
    body = _validate(ChatCompletionRequest, raw)
    messages = tuple(Message(m.role, m.content if isinstance(m.content, str) else "".join(p.text for p in m.content))
                     for m in body.messages)
    if tokenizer is None:
        raise BadRequest("this model has no tokenizer: chat needs one", "messages")
    try:
        text = apply_chat_template(tokenizer, messages)
    except SpecbenchError as err:
        raise BadRequest(str(err), "messages") from None
    except Exception as err:  # the model's template refusing these messages (jinja raise_exception: roles must
        # alternate, ...): the request's fault, a 400, never a 500 with a traceback
        raise BadRequest(f"the model's chat template refuses these messages ({type(err).__name__}: {err})",
                         "messages") from None
    token_ids = _encode(tokenizer, text, add_special_tokens=False)  # the template rendered BOS & co already
    name = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    if max_tokens is None:
        max_tokens = max(max_model_len - len(token_ids), 1)
    if body.top_logprobs and not body.logprobs:
        raise BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs")
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    try:
        grammar = grammar_of(body.response_format, body.tools, body.tool_choice, body.structured_outputs)
    except ConstraintError as err:
        raise BadRequest(str(err), err.param) from None
    if grammar is not None and reasoning_end:
        grammar = dataclasses.replace(grammar, starts_after=reasoning_end)
    return _request(body, token_ids, max_tokens, name, max_model_len, vocab_size, "messages", logprobs, None, grammar)


def _validate(model: type[GenerationBody], raw: bytes) -> GenerationBody:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("the request body is not valid JSON") from None
    except RecursionError:
        data = None
    if data is None or _is_deeper_than(data, MAX_JSON_DEPTH):
        raise BadRequest(f"the request body nests JSON deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    where = _lone_surrogate_at(data)
    if where is not None:  # JSON may escape one ("\ud800"); no tokenizer or UTF-8 encoder takes it
        param = _param(where)
        raise BadRequest(f"{repr(param) if param else 'the request body'} is not valid Unicode (a lone surrogate, "
                         "as \\ud800)", param)
    try:
        body = model.model_validate(data)
    except ValidationError as err:
        raise _bad_request(err) from None
    for name in non_neutral_fields(body):
        allowed = " or ".join(json.dumps(v) for v in NEUTRAL_VALUES[name])
        raise BadRequest(f"'{name}' is not supported by specbench serve (accepted only as {allowed})", name)
    return body


def _bad_request(err: ValidationError) -> BadRequest:
    errors = err.errors()
    first = errors[0]
    param = _param(first["loc"])
    if first["type"] == "extra_forbidden":  # the location ends in the unknown field's name
        param = ".".join(p for p in (_param(first["loc"][:-1]), str(first["loc"][-1])) if p)
        return BadRequest(f"'{param}' is not supported by specbench serve", param)
    if first["type"] == "missing":
        return BadRequest(f"'{param}' is required", param)
    # A value matching no member of a union fails once per member: say what each would have needed.
    reasons = list(dict.fromkeys(_reason(e) for e in errors if _param(e["loc"]) == param))
    return BadRequest(f"'{param}': {'; or '.join(reasons[:4])}", param)


def _reason(error: dict) -> str:
    # A validator's own message (the sampling limits) without pydantic's "Value error, " prefix.
    return str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]


def _param(loc: tuple) -> str | None:
    """The request field a pydantic error location names: field names and list indices, up to the first part that
    is neither (a union member's tag such as 'str' or 'list[int]', or a key inside a dict-valued field)."""
    parts = []
    for part in loc:
        if not isinstance(part, int) and part not in FIELD_NAMES:
            break
        parts.append(str(part))
    return ".".join(parts) or None


def _lone_surrogate_at(data: dict) -> tuple | None:
    """The location (keys and indices) of the first string, key or value, holding a lone surrogate; None if none.
    Iterative, as _is_deeper_than; the depth is already bounded."""
    stack: list[tuple[object, tuple]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, str):
            if LONE_SURROGATE.search(value):
                return loc
        elif isinstance(value, dict):
            for key, child in value.items():
                if LONE_SURROGATE.search(key):
                    return (*loc, key)
                stack.append((child, (*loc, key)))
        elif isinstance(value, list):
            stack.extend((child, (*loc, i)) for i, child in enumerate(value))
    return None


def _is_deeper_than(data: object, max_depth: int) -> bool:
    """Iterative (a recursive walk is what a hostile body would overflow)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _request(body: GenerationBody, token_ids: tuple[int, ...], max_tokens: int, max_tokens_name: str,
             max_model_len: int, vocab_size: int | None, prompt_name: str, logprobs: int | None,
             prompt_logprobs: int | None, grammar: GrammarSpec | None = None) -> GenerationRequest:
    room = max_model_len - len(token_ids)
    if room < 1:
        raise BadRequest(f"'{prompt_name}' is {len(token_ids)} tokens but the model's context is {max_model_len}: "
                         "no room to generate", prompt_name)
    if max_tokens > room:
        raise BadRequest(
            f"'{max_tokens_name}' is {max_tokens} but the prompt has {len(token_ids)} tokens and the model's context "
            f"is {max_model_len}: at most {room} tokens can be generated", max_tokens_name)
    if vocab_size is not None and body.top_k is not None and body.top_k > vocab_size:
        raise BadRequest(f"'top_k' is {body.top_k} but the vocabulary has {vocab_size} tokens", "top_k")
    stop = body.stop
    stop = () if stop is None else (stop,) if isinstance(stop, str) else tuple(s for s in stop if s)
    try:
        params = SamplingParams(
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            top_k=-1 if body.top_k in (None, 0, -1) else body.top_k,
            max_tokens=max_tokens,
            seed=body.seed,
            stop=stop,
            ignore_eos=body.ignore_eos,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
            grammar=grammar,
        )
    except SpecbenchError as err:  # request_models checks the same limits first: a field this misses is a bug
        raise BadRequest(str(err)) from None
    options = body.stream_options
    return GenerationRequest(
        model=body.model,
        prompt_token_ids=token_ids,
        params=params,
        is_stream=body.stream,
        include_usage=body.stream and options is not None and options.include_usage,
        continuous_usage=body.stream and options is not None and options.continuous_usage_stats,
    )


def _encode(tokenizer, text: str, *, add_special_tokens: bool) -> tuple[int, ...]:
    if tokenizer is None:
        raise BadRequest("this model has no tokenizer: send token ids", "prompt")
    try:
        ids = tuple(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
    except (ValueError, TypeError, OverflowError) as err:  # what a tokenizer refuses is the request's fault: 400
        raise BadRequest(f"the prompt cannot be tokenised ({type(err).__name__}: {err})", "prompt") from None
    if not ids:
        raise BadRequest("empty prompt", "prompt")
    return ids
