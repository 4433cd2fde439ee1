"""Typed JSON errors: every failure is ``{"error": {"status", "code", "message"}}`` with its HTTP status,
never a traceback.

| status | when |
|---|---|
| 400 | a query the search cannot take (``invalid_query``) |
| 401 | a write without the bearer token, when ``SCIX_API_TOKEN`` is set |
| 404 | an unknown user, paper or index |
| 409 | an interaction the state refuses (``invalid_interaction``) |
| 413 | a body or a query over its size limit |
| 422 | bad parameters: validation, an unknown name, a bad filter or setting |
| 503 | a backend down or missing (the body names it) |
| 500 | anything else (logged; the body says only that it failed) |
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from scix_core.errors import (
    BackendUnavailableError,
    ConfigError,
    FilterError,
    IndexBusyError,
    IndexNotFoundError,
    InteractionError,
    MissingExtraError,
    ModelUnavailableError,
    QueryError,
    ScixError,
    UnknownNameError,
    UnknownPaperError,
    UnknownUserError,
    VectorIndexUnavailableError,
)

LOG = logging.getLogger("scix_core.serve")

#: the HTTP status of each typed error (the first matching class wins)
STATUS: tuple[tuple[type[ScixError], int], ...] = (
    (QueryError, 400),
    (UnknownUserError, 404),
    (UnknownPaperError, 404),
    (IndexNotFoundError, 404),
    (InteractionError, 409),
    (FilterError, 422),
    (UnknownNameError, 422),
    (ConfigError, 422),
    (BackendUnavailableError, 503),
    (VectorIndexUnavailableError, 503),
    (ModelUnavailableError, 503),
    (MissingExtraError, 503),
    (IndexBusyError, 503),
)


class ApiError(Exception):
    """An error the API raises itself (limits, the token, a parameter check)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def response(self) -> JSONResponse:
        return body(self.status, self.code, self.message)


def body(status: int, code: str, message: str, **extra) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "code": code, "message": message, **extra}}, status)


def status_of(exc: ScixError) -> int:
    return next((status for cls, status in STATUS if isinstance(exc, cls)), 500)


def install_handlers(app: FastAPI, metrics) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return exc.response()

    @app.exception_handler(ScixError)
    async def scix_error(request: Request, exc: ScixError):
        status = status_of(exc)
        if status == 503:
            metrics.backend_error(exc.code)
        return body(status, exc.code, str(exc))

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError):
        errors = [
            {"where": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg", "")}
            for e in exc.errors()
        ]
        return body(
            422, "bad_parameters", "; ".join(f"{e['where']}: {e['message']}" for e in errors), errors=errors
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return body(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        LOG.exception("unexpected error on %s", request.url.path)
        return body(500, "internal_error", f"{type(exc).__name__} while serving {request.url.path}")
