"""Every error `specbench serve` answers is in OpenAI's shape, including the framework's own (unknown route 404,
wrong method 405, request validation, unhandled exceptions 500), never FastAPI's `{"detail": ...}`."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from specbench.serve.responses import error_body

def error_response(message: str, status: int, param: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(message, status, param), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return error_response(f"{request.method} {request.url.path}: {exc.detail}", exc.status_code,
                              headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        param = ".".join(str(p) for p in first["loc"] if p != "body") or None
        return error_response(f"'{param}': {first['msg']}" if param else first["msg"], 400, param)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        return error_response(f"internal server error: {type(exc).__name__}: {exc}", 500)
