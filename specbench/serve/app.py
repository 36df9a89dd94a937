"""The ASGI app of `specbench serve`: OpenAI routes, /metrics, /health, /version over one EngineLoop."""

from __future__ import annotations

import asyncio
import copy
import hmac

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

import specbench
from specbench.serve.engine_loop import Admitted, EngineLoop, Event, Failed, Rejected
from specbench.serve.generation import stream_events, whole_response
from specbench.serve.protocol import BadRequest, parse_chat, parse_completion
from specbench.serve.responses import ResponseKind, error_body


def build_app(loop: EngineLoop, model_name: str, api_key: str | None) -> FastAPI:
    app = FastAPI(title="specbench serve", docs_url=None, redoc_url=None, openapi_url=None)
    # The engine thread decodes with the engine's tokenizer; HTTP handlers use their own copy (fast tokenizers
    # are not safe to share across threads).
    tokenizer = copy.deepcopy(loop.engine.tokenizer)
    max_model_len = loop.engine.stop_checker.max_model_len

    def denied(request: Request) -> JSONResponse | None:
        if api_key is None:
            return None
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            return None
        return JSONResponse(error_body("invalid or missing API key", 401, "authentication_error"), status_code=401)

    async def generate(request: Request, is_chat: bool) -> Response:
        refusal = denied(request)
        if refusal is not None:
            return refusal
        try:
            body = await request.json()
            parse = parse_chat if is_chat else parse_completion
            gen = parse(body, tokenizer, max_model_len)
        except (ValueError, BadRequest) as err:  # json.JSONDecodeError is a ValueError
            return JSONResponse(error_body(str(err), 400), status_code=400)
        if gen.model is not None and gen.model != model_name:
            return JSONResponse(error_body(f"the model {gen.model!r} does not exist", 404, "not_found_error"),
                                status_code=404)
        events: asyncio.Queue[Event] = asyncio.Queue()
        loop.submit(gen.prompt_token_ids, gen.params, _sink(asyncio.get_running_loop(), events))
        first = await events.get()
        if isinstance(first, Rejected):
            return JSONResponse(error_body(first.message, 400), status_code=400)
        if isinstance(first, Failed):
            return JSONResponse(error_body(first.message, 500, "server_error"), status_code=500)
        assert isinstance(first, Admitted)
        kind = ResponseKind.new(is_chat, model_name)
        if gen.is_stream:
            return StreamingResponse(stream_events(events, gen, kind, tokenizer), media_type="text/event-stream")
        status, payload = await whole_response(events, gen, kind)
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
    async def health() -> Response:
        if loop.is_healthy:
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "error", "error": loop.error}, status_code=503)

    @app.get("/version")
    async def version() -> Response:
        return JSONResponse({"version": specbench.__version__, "server": "specbench"})

    @app.get("/metrics")
    async def metrics() -> Response:
        return PlainTextResponse(loop.counters.render(model_name), media_type="text/plain; version=0.0.4")

    return app


def _sink(aloop: asyncio.AbstractEventLoop, events: asyncio.Queue):
    """Engine-thread events into the request's asyncio queue (dropped once the server's loop is closed)."""

    def put(event: Event) -> None:
        try:
            aloop.call_soon_threadsafe(events.put_nowait, event)
        except RuntimeError:
            pass

    return put
