"""Send one streaming OpenAI request and read its events into a StreamState; failures become one error line."""

from __future__ import annotations

import asyncio
import time

import httpx

from specbench.backends import server_text
from specbench.backends.request_body import HttpRequest
from specbench.backends.sse import DONE, sse_data
from specbench.backends.stream_state import StreamFormatError, StreamState

MAX_ERROR_BODY = 2000  # bytes of an error response read for its message


class RequestFailed(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind  # "http 500", "timeout", "connection", "stream", "malformed": error_summary groups by it


async def stream_completion(client: httpx.AsyncClient, request: HttpRequest, state: StreamState) -> None:
    """Raises RequestFailed; `state` keeps whatever arrived before a failure."""
    state.send_time = time.perf_counter()
    async with client.stream("POST", request.path, json=request.body) as response:
        if response.status_code >= 400:
            body = b""
            async for part in response.aiter_bytes():
                body += part
                if len(body) >= MAX_ERROR_BODY:
                    break
            raise RequestFailed(f"http {response.status_code}", _error_text(body) or response.reason_phrase)
        async for data in sse_data(response.aiter_lines()):
            if data.strip() == DONE:
                state.is_done = True
                break
            state.add_event(data, time.perf_counter())
    if state.finish_reason is None:  # a server that cuts a stream may still send [DONE] (llama-cpp-python does)
        ending = "with [DONE]" if state.is_done else "without [DONE]"
        raise RequestFailed("truncated stream", f"ended before a finish_reason ({ending})")


async def run_request(
    client: httpx.AsyncClient, request: HttpRequest, timeout_s: float
) -> tuple[StreamState, str | None]:
    """(what arrived, None) on success, else (what arrived, "kind: detail"). `timeout_s` bounds the whole request,
    connect to last byte: wait_for cancels it however slowly the server drips (httpx's own timeouts are per read)."""
    state = StreamState()
    try:
        await asyncio.wait_for(stream_completion(client, request, state), timeout_s)
    except RequestFailed as err:
        return state, str(err)
    except (asyncio.TimeoutError, httpx.TimeoutException):
        return state, f"timeout: no complete response within {timeout_s:g} s"
    except httpx.ConnectError as err:
        return state, f"connection: {err or type(err).__name__}"
    except (httpx.RemoteProtocolError, httpx.ReadError) as err:
        return state, f"stream: connection closed mid-stream ({err or type(err).__name__})"
    except StreamFormatError as err:
        return state, f"malformed: {err}"
    except httpx.HTTPError as err:
        return state, f"http: {type(err).__name__}: {err}"
    return state, None


def _error_text(body: bytes) -> str:
    """The message of an OpenAI-style error body, else its first line."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = server_text.loads(text)
    except ValueError:
        return text.splitlines()[0][:200] if text else ""
    error = data.get("error", data) if isinstance(data, dict) else data
    message = error.get("message") if isinstance(error, dict) else None
    return str(message if message is not None else error)[:200]
