"""The HTTP edge of the ranker: what stands between a client's bytes and the app.

A 422 echoes at most a short prefix of each input, readable as JSON whatever was sent (FastAPI's default
handler echoes inputs whole: NaN or a lone surrogate made it a 500, a 12 MB body an 11 MB answer); a body
over the limit is a 413 before it is parsed; every answer is counted by endpoint and status code, the 413s
and the 500s of unhandled exceptions included, so /metrics shows them.
"""

import json
from collections.abc import Mapping

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from solaris.serving.metrics import RankerMetrics

MAX_BODY_BYTES = 1 << 20  # a full request (1000 candidates with positions) is about 20 kB
ECHO_CHARS = 200  # the most of any one input, loc part or message that a 422 echoes
MAX_ERRORS = 10  # errors listed in one 422 (one per bad item or unknown key otherwise)


def _text(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as UTF-8 can carry it (a lone surrogate becomes the six characters ``\\ud800``), cut at ``limit``."""
    clean = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return clean if len(clean) <= limit else clean[:limit] + "…"


def _echo(value: object) -> object:
    """What a client sent, for an error to show: the value itself when it is short and JSON can carry it back,
    else the first ``ECHO_CHARS`` characters of its text (``NaN``, ``Infinity`` and surrogates readable)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bytes | bytearray):  # a body that was not declared JSON
        return _text(bytes(value[: 4 * ECHO_CHARS]).decode("utf-8", "backslashreplace"))
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # NaN or Infinity, a lone surrogate, not JSON at all
        try:
            text = json.dumps(value, ensure_ascii=False, default=repr)
        except (ValueError, RecursionError):
            text = f"<{type(value).__name__}>"
    else:
        if len(text) <= ECHO_CHARS:
            return value
    return _text(text)


def _error(error: Mapping[str, object], body: object) -> dict[str, object]:
    """One of pydantic's (or FastAPI's) errors as JSON can carry it: where, what, and a bounded echo."""
    kind = str(error.get("type", "value_error"))
    parts: tuple = error.get("loc", ())  # type: ignore[assignment]
    loc = [part if isinstance(part, int) else _text(str(part)) for part in parts]
    if kind == "json_invalid":  # FastAPI's own: json.loads failed, at character loc[-1]
        reason = (error.get("ctx") or {}).get("error", "")  # type: ignore[union-attr]
        msg, echoed = f"the body is not valid JSON: {reason}", _echo(body)
    else:
        msg, echoed = str(error.get("msg", "")), _echo(error.get("input"))
    return {"loc": loc, "msg": _text(msg, 2 * ECHO_CHARS), "type": kind, "input": echoed}


async def validation_failed(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's own handler echoes each input whole: a NaN or a lone surrogate cannot be written as the
    answer's JSON (a 500), and a 12 MB body came back as an 11 MB answer."""
    errors = exc.errors()
    detail = [_error(error, exc.body) for error in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        more = f"{len(errors) - MAX_ERRORS} more errors not listed"
        detail.append({"loc": ["body"], "msg": more, "type": "too_many_errors"})
    return JSONResponse({"detail": detail}, status_code=422)


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` is answered 413 before the app reads any of it.

    A declared Content-Length is checked first (the server holds the body to it); a body without one
    (chunked) is read here, counting, and handed on once it is known to fit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None:
            if declared > self.max_bytes:
                await self._refuse(send)
            else:
                await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client went away: the app hears it
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        buffered = iter(messages)

        async def replay() -> Message:
            return next(buffered, None) or await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": f"the request body is over the limit of {self.max_bytes} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        # The rest of the body is never read: the connection cannot carry another request.
        await send({"type": "http.response.start", "status": 413, "headers": [*headers, (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class ResponseCounter:
    """ASGI middleware: counts each answer by endpoint and status code, as it starts. Outside the app's
    exception handling, so an exception no handler took is counted as the 500 the server then sends."""

    def __init__(self, app: ASGIApp, metrics: RankerMetrics, endpoints: frozenset[str]) -> None:
        self.app, self.metrics, self.endpoints = app, metrics, endpoints

    def endpoint(self, scope: Scope, path: str) -> str:
        route = getattr(scope.get("route"), "path", None)  # set by the router once a route matched
        if route is not None:
            return route
        return path if path in self.endpoints else "other"  # a path per scanner probe would grow without end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, started = scope["path"], False

        async def counted(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.responded(self.endpoint(scope, path), message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        except Exception:
            if not started:
                self.metrics.responded(self.endpoint(scope, path), 500)
            raise
