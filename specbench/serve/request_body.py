"""Reading and parsing a request body without letting one request stall the others: the body is read up to a byte
limit (past it: 413, the rest unread), and JSON parsing, validation, chat templating and tokenisation run on
worker threads, never on the event loop that serves every other request."""

from __future__ import annotations

import asyncio
import copy
import threading
from concurrent.futures import ThreadPoolExecutor

from fastapi import Request

from specbench.serve.protocol import GenerationRequest, parse_chat, parse_completion

NUM_PARSE_WORKERS = 2  # requests tokenised at once; each worker holds its own tokenizer copy


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes (the server's --max-request-bytes)")


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, or BodyTooLarge as soon as it (declared or received) passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    num_bytes = 0
    async for chunk in request.stream():  # a chunked body declares no length: count what arrives
        num_bytes += len(chunk)
        if num_bytes > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


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
