"""The HTTP plumbing the API modules share (app/server/app.py's OpenAI routes, app/server/responses.py): a request's
JSON body read within its size limit, and the server-sent event response that lets go of its job and its lease however
it ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from app.server.engine_queue import Job
from app.server.params import MAX_BODY_BYTES, ApiError, parse_json_body
from app.server.router import Lease


async def read_body(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":  # also keeps out HTML forms, which cannot send JSON
        raise ApiError(415, "send the request body as application/json", code="unsupported_media_type")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, f"the request body is larger than {MAX_BODY_BYTES // (1024 * 1024)} MiB",
                           code="request_too_large")
        chunks.append(chunk)
    return parse_json_body(b"".join(chunks))


class _EventStream(StreamingResponse):
    """A server-sent event stream that lets go of its job and its lease however it ends: done, failed, or the client
    gone — also gone before the body started, when Starlette cancels the response without ever running the body's
    generator (whose own ``finally`` then never runs, and an on-demand model would stay "in use" for good)."""

    def __init__(self, events: AsyncIterator[bytes], on_close: Callable[[], None],
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})})
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


def _closer(watcher: asyncio.Task[None], job: Job, lease: Lease) -> Callable[[], None]:
    def close() -> None:
        watcher.cancel()
        job.cancel()
        lease.release()
    return close
