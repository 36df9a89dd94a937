"""Turn one admitted request's engine events into an SSE stream or a whole OpenAI response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from specbench.serve.engine_loop import Aborted, Emitted, Event, Failed, Finished
from specbench.serve.logprobs_format import (
    TokenTexts,
    chat_logprobs,
    completion_logprobs,
    prompt_logprobs_field,
)
from specbench.serve.protocol import GenerationRequest
from specbench.serve.reasoning_split import ReasoningStream, split_answer
from specbench.serve.responses import DONE_EVENT, ResponseKind, error_body, sse, usage
from specbench.serve.text_stream import TextStreamer
from specbench.serve.tool_call_stream import ToolCallStream


async def stream_events(
    events: asyncio.Queue[Event], gen: GenerationRequest, kind: ResponseKind, tokenizer,
    reasoning_end: str | None = None,
) -> AsyncIterator[str]:
    """One chunk per engine step that settled new text, or per step under continuous usage (a text-less one when
    its text is held back: a partial character, a possible stop string, end-of-sequence); the finish chunk; usage.
    `reasoning_end` (chat): text before it streams as delta.reasoning_content (serve/reasoning_split.py)."""
    streamer = TextStreamer(tokenizer, gen.params.stop)
    thinking = ReasoningStream(reasoning_end) if kind.is_chat and reasoning_end else None
    num_prompt = len(gen.prompt_token_ids)
    logprobs = _LogprobStream(kind, TokenTexts(tokenizer))
    # a chat request under a tool-call grammar streams its text as delta.tool_calls (serve/tool_call_stream.py)
    tool_call = ToolCallStream(kind.call_id) if kind.is_chat and _is_tool_call(gen) else None

    def running_usage() -> dict[str, int] | None:
        return usage(num_prompt, len(streamer.token_ids)) if gen.continuous_usage else None

    if kind.is_chat:
        yield kind.chunk(None, None, running_usage())
    while True:
        event = await events.get()
        if isinstance(event, Emitted):
            delta, thought = streamer.push(event.token_ids), ""
            if thinking is not None:
                thought, delta = thinking.push(delta)
            calls = None
            if tool_call is not None:
                delta, calls = "", tool_call.push(delta)
            step_logprobs, prompt_logprobs = logprobs.of(event)
            # a step whose text is held back still reports its tokens' time, and their logprobs
            if (delta or thought or calls or gen.continuous_usage or step_logprobs is not None
                    or prompt_logprobs is not None):
                yield kind.chunk(delta, None, running_usage(), step_logprobs, prompt_logprobs, calls, thought)
        elif isinstance(event, Finished):
            output = event.output
            final = usage(num_prompt, len(output.output_token_ids), output.stats.num_cached_prompt_tokens)
            rest, finish_reason, calls, thought = streamer.finish(output.text or ""), output.finish_reason, None, ""
            if thinking is not None:
                thought, rest = thinking.finish(rest)
            if tool_call is not None:
                calls = tool_call.push(rest)
                rest = "" if tool_call.is_started else tool_call.held_text  # never a call: its text as content
                if tool_call.is_started and finish_reason == "stop":
                    finish_reason = "tool_calls"
            yield kind.chunk(rest, finish_reason, final if gen.continuous_usage else None, tool_calls=calls,
                             reasoning=thought)
            if gen.include_usage:
                yield kind.usage_chunk(final)
            yield DONE_EVENT
            return
        elif isinstance(event, (Failed, Aborted)):
            yield sse(error_body(event.message, 503 if isinstance(event, Aborted) else 500))
            yield DONE_EVENT
            return


class _LogprobStream:
    """The logprobs fields of each streamed chunk: its tokens' logprobs (completions' text offsets run on across
    chunks) and, once, the prompt's."""

    def __init__(self, kind: ResponseKind, text_of: TokenTexts) -> None:
        self.kind = kind
        self.text_of = text_of
        self._offset = 0  # completions: text offset of the next token
        self._is_prompt_sent = False

    def of(self, event: Emitted) -> tuple[dict | None, list | None]:
        step = None
        if event.logprobs is not None:
            if self.kind.is_chat:
                step = chat_logprobs(event.logprobs, self.text_of)
            else:
                step = completion_logprobs(event.logprobs, self.text_of, self._offset)
                self._offset += sum(len(token) for token in step["tokens"])
        prompt = None
        if event.prompt_logprobs is not None and not self._is_prompt_sent and not self.kind.is_chat:
            prompt = prompt_logprobs_field(event.prompt_logprobs, self.text_of)
            self._is_prompt_sent = True
        return step, prompt


async def whole_response(events: asyncio.Queue[Event], gen: GenerationRequest, kind: ResponseKind, tokenizer,
                         reasoning_end: str | None = None) -> tuple[int, dict[str, Any]]:
    """`reasoning_end` (chat): the text before it is sent as message.reasoning_content (serve/reasoning_split.py)."""
    while True:
        event = await events.get()
        if isinstance(event, Finished):
            output = event.output
            text_of = TokenTexts(tokenizer)
            logprobs = prompt_logprobs = None
            if output.logprobs is not None:
                logprobs = (chat_logprobs(output.logprobs, text_of) if kind.is_chat
                            else completion_logprobs(output.logprobs, text_of, 0))
            if output.prompt_logprobs is not None and not kind.is_chat:
                prompt_logprobs = prompt_logprobs_field(output.prompt_logprobs, text_of)
            text, reasoning = output.text or "", None
            if kind.is_chat and reasoning_end:
                reasoning, text = split_answer(text, reasoning_end)
            body = kind.full(text, output.finish_reason,
                             usage(len(gen.prompt_token_ids), len(output.output_token_ids),
                                   output.stats.num_cached_prompt_tokens), logprobs,
                             prompt_logprobs, is_tool_call=_is_tool_call(gen), reasoning=reasoning)
            return 200, body
        if isinstance(event, Failed):
            return 500, error_body(event.message, 500)
        if isinstance(event, Aborted):
            return 503, error_body(event.message, 503)


def _is_tool_call(gen: GenerationRequest) -> bool:
    """The request is under a tool-call grammar (tools with tool_choice "required" or a named function)."""
    return gen.params.grammar is not None and gen.params.grammar.kind == "tool_call"
