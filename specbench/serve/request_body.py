"""Reading and parsing a request body without letting one request stall the others: the body is read up to a byte
limit (past it: 413, the rest drained within a bound), and JSON parsing, validation, chat templating and
tokenisation run on worker threads, never on the event loop that serves every other request."""

from __future__ import annotations

import asyncio
import copy
import threading
from concurrent.futures import ThreadPoolExecutor

from fastapi import Request
from starlette.requests import ClientDisconnect

from specbench.serve.protocol import GenerationRequest, parse_chat, parse_completion

NUM_PARSE_WORKERS = 2  # requests tokenised at once; each worker holds its own tokenizer copy


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes (the server's --max-request-bytes)")


# Past the limit the server still reads (and drops) up to this many bytes for up to this long before it answers 413:
# a client still sending its body gets the 413 instead of a connection reset mid-upload (a lingering close, as web
# servers do). Bodies declared larger than the drain cap are refused at once.
DRAIN_FACTOR = 4
DRAIN_SECONDS = 5.0


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or BodyTooLarge once it (declared or received) passes `limit` bytes (the rest drained first,
    within DRAIN_FACTOR x limit bytes and DRAIN_SECONDS)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        if int(declared) <= DRAIN_FACTOR * limit:
            await _drain(request.stream(), DRAIN_FACTOR * limit)
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    num_bytes = 0
    stream = request.stream()
    async for chunk in stream:  # a chunked body declares no length: count what arrives
        num_bytes += len(chunk)
        if num_bytes > limit:
            await _drain(stream, DRAIN_FACTOR * limit - num_bytes)
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(stream, max_bytes: int) -> None:
    """Read and drop the rest of a refused body: at most `max_bytes`, for at most DRAIN_SECONDS."""
    num_bytes = 0
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for chunk in stream:
                num_bytes += len(chunk)
                if num_bytes > max_bytes:
                    return
    except (TimeoutError, ClientDisconnect):
        return


class Parser:
    """Parses bodies on a small thread pool. Fast tokenizers are not safe to share across threads, so each worker
    thread parses with its own copy of the engine's tokenizer."""

    def __init__(self, tokenizer, max_model_len: int, vocab_size: int, reasoning_end: str | None = None) -> None:
        self._tokenizer = tokenizer
        self._reasoning_end = reasoning_end
        self._max_model_len = max_model_len
        self._vocab_size = vocab_size
        self._local = threading.local()
        self._copy_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(NUM_PARSE_WORKERS, thread_name_prefix="specbench-parse")

    async def parse(self, raw: bytes, is_chat: bool) -> GenerationRequest:
        """BadRequest for a bad body."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._parse, raw, is_chat)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _parse(self, raw: bytes, is_chat: bool) -> GenerationRequest:
        if is_chat:
            return parse_chat(raw, self._thread_tokenizer(), self._max_model_len, self._vocab_size,
                              self._reasoning_end)
        return parse_completion(raw, self._thread_tokenizer(), self._max_model_len, self._vocab_size)

    def _thread_tokenizer(self):
        if not hasattr(self._local, "tokenizer"):
            with self._copy_lock:
                self._local.tokenizer = copy.deepcopy(self._tokenizer)
        return self._local.tokenizer
