"""Turn one admitted request's engine events into an SSE stream or a whole OpenAI response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from specbench.serve.engine_loop import Aborted, Emitted, Event, Failed, Finished
from specbench.serve.protocol import GenerationRequest
from specbench.serve.responses import DONE_EVENT, ResponseKind, error_body, sse, usage
from specbench.serve.text_stream import TextStreamer


async def stream_events(
    events: asyncio.Queue[Event], gen: GenerationRequest, kind: ResponseKind, tokenizer
) -> AsyncIterator[str]:
    """One chunk per engine step that settled new text, or per step under continuous usage (a text-less one when
    its text is held back: a partial character, a possible stop string, end-of-sequence); the finish chunk; usage."""
    streamer = TextStreamer(tokenizer, gen.params.stop)
    num_prompt = len(gen.prompt_token_ids)

    def running_usage() -> dict[str, int] | None:
        return usage(num_prompt, len(streamer.token_ids)) if gen.continuous_usage else None

    if kind.is_chat:
        yield kind.chunk(None, None, running_usage())
    while True:
        event = await events.get()
        if isinstance(event, Emitted):
            delta = streamer.push(event.token_ids)
            if delta or gen.continuous_usage:  # a step whose text is held back still reports its tokens' time
                yield kind.chunk(delta, None, running_usage())
        elif isinstance(event, Finished):
            output = event.output
            final = usage(num_prompt, len(output.output_token_ids))
            yield kind.chunk(streamer.finish(output.text or ""), output.finish_reason,
                             final if gen.continuous_usage else None)
            if gen.include_usage:
                yield kind.usage_chunk(final)
            yield DONE_EVENT
            return
        elif isinstance(event, (Failed, Aborted)):
            yield sse(error_body(event.message, 503 if isinstance(event, Aborted) else 500))
            yield DONE_EVENT
            return


async def whole_response(events: asyncio.Queue[Event], gen: GenerationRequest, kind: ResponseKind
                         ) -> tuple[int, dict[str, Any]]:
    while True:
        event = await events.get()
        if isinstance(event, Finished):
            output = event.output
            body = kind.full(output.text or "", output.finish_reason,
                             usage(len(gen.prompt_token_ids), len(output.output_token_ids)))
            return 200, body
        if isinstance(event, Failed):
            return 500, error_body(event.message, 500)
        if isinstance(event, Aborted):
            return 503, error_body(event.message, 503)
