"""The ASGI app of `specbench serve`: OpenAI routes, /metrics, /health, /version over one EngineLoop."""

from __future__ import annotations

import asyncio
import copy
import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

import specbench
from specbench.serve.config import ServeConfig
from specbench.serve.engine_loop import Aborted, Admitted, EngineLoop, Event, Failed, Rejected
from specbench.serve.error_handlers import error_response, install_error_handlers
from specbench.serve.generation import stream_events, whole_response
from specbench.serve.protocol import BadRequest
from specbench.serve.request_body import BodyTooLarge, Parser, read_body
from specbench.serve.responses import ResponseKind

CLIENT_CLOSED = 499  # status of a response nobody reads (nginx's convention); never reaches a client


def build_app(loop: EngineLoop, config: ServeConfig, api_key: str | None, fault: str | None = None) -> FastAPI:
    """`fault`: the name of the fault injected into the engine (/version and /metrics say it), None for a real one."""
    model_name = config.model_name
    # The engine thread decodes with the engine's tokenizer; HTTP handlers stream with their own copy and parse
    # with the parser threads' copies (fast tokenizers are not safe to share across threads).
    tokenizer = copy.deepcopy(loop.engine.tokenizer)
    max_model_len = loop.engine.stop_checker.max_model_len
    parser = Parser(tokenizer, max_model_len, loop.engine.vocab_size, config.reasoning_end)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        parser.close()

    app = FastAPI(title="specbench serve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    install_error_handlers(app)

    def denied(request: Request) -> JSONResponse | None:
        if api_key is None:
            return None
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            return None
        return error_response("invalid or missing API key", 401)

    async def generate(request: Request, is_chat: bool) -> Response:
        refusal = denied(request)
        if refusal is not None:
            return refusal
        try:
            gen = await parser.parse(await read_body(request, config.max_request_bytes), is_chat)
        except BodyTooLarge as err:  # the rest of the body may be unread: the connection cannot serve another request
            return error_response(str(err), 413, headers={"connection": "close"})
        except BadRequest as err:
            return error_response(str(err), 400, err.param)
        except ClientDisconnect:  # gone mid-body: nobody reads an answer, and a disconnect is no server error
            return Response(status_code=CLIENT_CLOSED)
        if gen.model is not None and gen.model != model_name:
            return error_response(f"the model {gen.model!r} does not exist", 404, "model")
        events: asyncio.Queue[Event] = asyncio.Queue()
        loop.submit(gen.prompt_token_ids, gen.params, _sink(asyncio.get_running_loop(), events))
        first = await events.get()
        if isinstance(first, Rejected):
            return error_response(first.message, 400)
        if isinstance(first, (Failed, Aborted)):
            return error_response(first.message, 503 if isinstance(first, Aborted) else 500)
        assert isinstance(first, Admitted)
        kind = ResponseKind.new(is_chat, model_name)
        request_id = first.request_id
        if gen.is_stream:
            return _EngineStream(stream_events(events, gen, kind, tokenizer, config.reasoning_end),
                                 on_close=lambda: loop.abort(request_id))
        answer = asyncio.ensure_future(whole_response(events, gen, kind, tokenizer, config.reasoning_end))
        gone = asyncio.ensure_future(_disconnected(request))
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if not answer.done():
            answer.cancel()
            loop.abort(request_id)
            return Response(status_code=CLIENT_CLOSED)
        status, payload = answer.result()
        return JSONResponse(payload, status_code=status)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await generate(request, is_chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await generate(request, is_chat=True)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        refusal = denied(request)
        if refusal is not None:
            return refusal
        card = {"id": model_name, "object": "model", "created": 0, "owned_by": "specbench",
                "max_model_len": max_model_len}
        return JSONResponse({"object": "list", "data": [card]})

    @app.get("/health")
    async def health(request: Request) -> Response:
        refusal = denied(request) if config.is_probe_auth else None
        if refusal is not None:
            return refusal
        if loop.is_healthy:
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "error", "error": loop.error}, status_code=503)

    @app.get("/version")
    async def version() -> Response:
        # Its speculative config, so a client that was not told can label what it measures (server_info.py).
        config = loop.engine.config
        speculative = {"method": config.method, "num_steps": config.max_num_steps if config.method != "none" else 0}
        shape = loop.engine.draft_shape
        if shape.is_tree:  # SGLang's names; num_draft_tokens here leaves the root out (None: every node)
            speculative.update(eagle_topk=shape.eagle_topk, num_draft_tokens=shape.num_draft_tokens)
        # `fault`: the injected fault's name (serve --inject: a mutant, not a real result), None for a real engine;
        # `hybrid`: the target carries recurrent state (the stress stage adds its conditions' reasons)
        return JSONResponse({"version": specbench.__version__, "server": "specbench", "speculative": speculative,
                             "fault": fault, "hybrid": loop.engine.runner.model.config.is_hybrid})

    @app.post("/reset_prefix_cache")
    async def reset_prefix_cache(request: Request) -> Response:
        # vLLM's endpoint: a sweep empties the cache before each cell (backends/cache_reset.py)
        refusal = denied(request)
        if refusal is not None:
            return refusal
        num = await asyncio.to_thread(loop.reset_prefix_cache, 10.0)
        if num is None:
            return JSONResponse({"error": "no prefix cache to reset (caching off, or the engine did not answer)"},
                                status_code=404 if loop.engine.scheduler.prefix is None else 503)
        return JSONResponse({"status": "ok", "num_blocks_forgotten": num})

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        refusal = denied(request) if config.is_probe_auth else None
        if refusal is not None:
            return refusal
        return PlainTextResponse(loop.counters.render(model_name, fault), media_type="text/plain; version=0.0.4")

    return app


class _EngineStream(StreamingResponse):
    """An SSE response that calls `on_close` however it ends: finished, or cut because the client disconnected
    (Starlette then cancels the stream, possibly before its first chunk). Aborting a finished request is a no-op."""

    def __init__(self, content, on_close: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream")
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the body was read: only a disconnect can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _sink(aloop: asyncio.AbstractEventLoop, events: asyncio.Queue):
    """Engine-thread events into the request's asyncio queue (dropped once the server's loop is closed)."""

    def put(event: Event) -> None:
        try:
            aloop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:
            pass

    return put
