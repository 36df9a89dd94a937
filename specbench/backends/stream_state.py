"""What one streamed OpenAI response delivered, event by event (kept when the read is cut off by an error)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from specbench.backends import server_text
from specbench.backends.reasoning import DeltaText, split_delta
from specbench.backends.tool_call_deltas import ToolCallParts, merge_tool_call_deltas
from specbench.backends.server_logprobs import (
    MalformedLogprobs,
    ServerTokenLogprob,
    parse_logprobs,
    parse_prompt_logprobs,
)

SERVER_FIELDS = ("timings", "metrics", "meta_info")


class StreamFormatError(Exception):
    """The stream is not an OpenAI completion stream (bad JSON, no choices, an error event)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    time: float  # perf_counter when the event was parsed
    text: str  # content (answer) delta; "" for role-only, usage-only and finish events
    completion_tokens: int | None  # cumulative usage.completion_tokens carried by this event (continuous usage)
    reasoning: str = ""  # reasoning delta (reasoning.py); "" for answer-only events
    finish_reason: str | None = None  # set on the event that ended the choice
    tool_text: str = ""  # a streamed tool call's name and argument fragments (tool_call_deltas.py) in this event

    @property
    def emitted(self) -> str:
        """Everything the model generated in this event: reasoning, answer and tool calls are all output tokens."""
        return self.reasoning + self.text + self.tool_text


@dataclass
class StreamState:
    """Filled while a response streams; a timeout or disconnect keeps what arrived."""

    send_time: float | None = None  # perf_counter when the request was sent (after its concurrency slot)
    chunks: list[Chunk] = field(default_factory=list)  # every data event, in order
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # from the last usage block
    completion_tokens: int | None = None  # from the last usage block
    cached_prompt_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, where the server sends it
    is_usage_reported: bool = False
    is_done: bool = False  # the [DONE] sentinel arrived
    models: list[str] = field(default_factory=list)  # every distinct `model` the events named, in order
    # Top-level blocks some servers add beside the OpenAI fields (llama.cpp `timings`, vLLM `metrics`, SGLang
    # `meta_info`), the last of each kept: read by the server adapter (request_draft.py).
    server_fields: dict[str, Any] = field(default_factory=dict)
    # What the request asked for with SamplingParams.logprobs / prompt_logprobs (request_body.py), as the server sent
    # it (server_logprobs.py): every chunk's tokens in order, and vLLM's prompt_logprobs. Empty / None: none sent.
    logprobs: list[ServerTokenLogprob] = field(default_factory=list)
    prompt_logprobs: list[ServerTokenLogprob | None] | None = None
    # Tool calls streamed as delta.tool_calls, reassembled per call index (tool_call_deltas.py); empty: none.
    tool_calls: dict[int, ToolCallParts] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    @property
    def answer_text(self) -> str:
        """The answer: its content, or where it came as tool calls alone the first call in the tool-call grammar's
        shape (what the JSON workload judges)."""
        text = self.text
        if text or not self.tool_calls:
            return text
        return self.tool_calls[min(self.tool_calls)].as_text()

    @property
    def reasoning_text(self) -> str:
        return "".join(c.reasoning for c in self.chunks)

    @property
    def content_chunks(self) -> list[Chunk]:
        """The emissions: chunks that carried generated text (reasoning or answer)."""
        return [c for c in self.chunks if c.emitted]

    def add_event(self, data: str, now: float) -> None:
        """Parse one `data:` payload (not [DONE]) into the state."""
        try:
            event = server_text.loads(data)  # lone surrogates replaced: the text is stored and printed later
        except json.JSONDecodeError as err:
            raise StreamFormatError(f"not JSON ({err.msg}): {data[:80]!r}") from None
        if not isinstance(event, dict):
            raise StreamFormatError(f"event is not an object: {data[:80]!r}")
        if "error" in event or event.get("object") == "error":
            raise StreamFormatError(f"server error in stream: {_error_message(event)}")
        self.server_fields.update({k: event[k] for k in SERVER_FIELDS if isinstance(event.get(k), dict)})
        if isinstance(event.get("model"), str) and event["model"] not in self.models:
            self.models.append(event["model"])
        usage = event.get("usage")
        completion_tokens = None
        if isinstance(usage, dict):
            self.is_usage_reported = True
            self.prompt_tokens = _int_or(usage.get("prompt_tokens"), self.prompt_tokens)
            details = usage.get("prompt_tokens_details")  # vLLM, SGLang, llama.cpp: {"cached_tokens": n}
            if isinstance(details, dict):
                self.cached_prompt_tokens = _int_or(details.get("cached_tokens"), self.cached_prompt_tokens)
            completion_tokens = _int_or(usage.get("completion_tokens"), None)
            self.completion_tokens = _int_or(completion_tokens, self.completion_tokens)
        choices = event.get("choices")
        if not isinstance(choices, list) or (not choices and usage is None):
            raise StreamFormatError(f"event without choices: {data[:80]!r}")
        parts = DeltaText("", "")
        finish_reason = None
        tool_text = ""
        if choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise StreamFormatError(f"choice is not an object: {data[:80]!r}")
            parts = split_delta(choice)
            if isinstance(choice.get("delta"), dict):
                tool_text = merge_tool_call_deltas(self.tool_calls, choice["delta"])
            if choice.get("logprobs") is not None:
                try:
                    self.logprobs.extend(parse_logprobs(choice) or ())
                except MalformedLogprobs as err:  # the request fails alone, its logprobs never half-read
                    raise StreamFormatError(f"malformed logprobs ({err})") from None
            if choice.get("prompt_logprobs") is not None:
                self.prompt_logprobs = parse_prompt_logprobs(choice)
            if choice.get("finish_reason") is not None:
                finish_reason = self.finish_reason = str(choice["finish_reason"])
        self.chunks.append(Chunk(now, parts.answer, completion_tokens, parts.reasoning, finish_reason, tool_text))


def _int_or(value: Any, default: int | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _error_message(event: dict[str, Any]) -> str:
    error = event.get("error", event)
    if isinstance(error, dict):
        return str(error.get("message") or error)[:200]
    return str(error)[:200]
