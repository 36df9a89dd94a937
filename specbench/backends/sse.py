"""Server-sent events: the `data:` payloads of a stream, one per event (multi-line data joined with newlines)."""

from __future__ import annotations

from collections.abc import AsyncIterator

DONE = "[DONE]"


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Yield each event's data; comments (':'), `event:`/`id:` fields and data-less events are skipped."""
    data: list[str] = []
    async for line in lines:
        line = line.rstrip("\r")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)
