"""OpenAI response bodies: whole responses, stream chunks and usage, for completions and chat completions."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from specbench.serve.structured_request import tool_calls_message


@dataclass(frozen=True)
class ResponseKind:
    is_chat: bool
    model: str
    response_id: str
    created: int  # unix seconds

    @classmethod
    def new(cls, is_chat: bool, model: str) -> ResponseKind:
        prefix = "chatcmpl" if is_chat else "cmpl"
        return cls(is_chat, model, f"{prefix}-{uuid.uuid4().hex}", int(time.time()))

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.response_id, "object": obj, "created": self.created, "model": self.model}

    def chunk(self, text: str | None, finish_reason: str | None, usage: dict | None = None,
              logprobs: dict | None = None, prompt_logprobs: list | None = None,
              tool_calls: list[dict] | None = None, reasoning: str = "") -> str:
        """One SSE event. `text` None on chat's first chunk carries the role instead. `logprobs`: the chunk's
        tokens' (serve/logprobs_format.py); `prompt_logprobs` (completions, vLLM's extension): in the first chunk.
        `tool_calls` (chat): the chunk's `delta.tool_calls` entries (serve/tool_call_stream.py) instead of text.
        `reasoning` (chat, serve --reasoning-end): the chunk's thinking text, as `delta.reasoning_content`."""
        if self.is_chat:
            delta = {"role": "assistant", "content": ""} if text is None else ({"content": text} if text else {})
            if tool_calls:
                delta = {"tool_calls": tool_calls}
            if reasoning:
                delta["reasoning_content"] = reasoning
            choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
            body = self._head("chat.completion.chunk")
        else:
            choice = {"index": 0, "text": text or "", "logprobs": logprobs, "finish_reason": finish_reason}
            if prompt_logprobs is not None:
                choice["prompt_logprobs"] = prompt_logprobs
            body = self._head("text_completion")
        body["choices"] = [choice]
        if usage is not None:
            body["usage"] = usage
        return sse(body)

    def usage_chunk(self, usage: dict) -> str:
        body = self._head("chat.completion.chunk" if self.is_chat else "text_completion")
        return sse({**body, "choices": [], "usage": usage})

    @property
    def call_id(self) -> str:
        """The id of the response's one tool call (whole or streamed)."""
        return f"call_{self.response_id[-24:]}"

    def full(self, text: str, finish_reason: str, usage: dict, logprobs: dict | None = None,
             prompt_logprobs: list | None = None, is_tool_call: bool = False,
             reasoning: str | None = None) -> dict[str, Any]:
        """`is_tool_call`: the text is a tool-call grammar's {"name", "arguments"}: sent as message.tool_calls.
        `reasoning` (chat, serve --reasoning-end): the thinking split off `text`, as message.reasoning_content."""
        if self.is_chat:
            message = {"role": "assistant", "content": text}
            if is_tool_call:
                call = tool_calls_message(text, self.call_id)
                if call is not None:
                    message = call
                    finish_reason = "tool_calls" if finish_reason == "stop" else finish_reason
            if reasoning is not None:
                message["reasoning_content"] = reasoning
            choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason}
            body = self._head("chat.completion")
        else:
            choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}
            if prompt_logprobs is not None:
                choice["prompt_logprobs"] = prompt_logprobs
            body = self._head("text_completion")
        return {**body, "choices": [choice], "usage": usage}


def usage(num_prompt_tokens: int, num_completion_tokens: int, num_cached_tokens: int | None = None) -> dict:
    """OpenAI usage; `num_cached_tokens` (prompt tokens served from the prefix cache) as vLLM and SGLang send it."""
    body: dict = {"prompt_tokens": num_prompt_tokens, "completion_tokens": num_completion_tokens,
                  "total_tokens": num_prompt_tokens + num_completion_tokens}
    if num_cached_tokens is not None:
        body["prompt_tokens_details"] = {"cached_tokens": num_cached_tokens}
    return body


def sse(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


DONE_EVENT = "data: [DONE]\n\n"


_ERROR_KINDS = {401: "authentication_error", 404: "not_found_error", 503: "service_unavailable"}


def error_body(message: str, status: int, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape; every error `specbench serve` answers has it (`code` is the HTTP status)."""
    kind = _ERROR_KINDS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}
