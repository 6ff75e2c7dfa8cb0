"""What keeps the local server local: the bind policy and a guard in front of every request.

Local OpenAI-compatible servers have shipped open to any web page (wildcard CORS), to the LAN without a
token, and to DNS rebinding (a page on evil.example re-resolves its name to 127.0.0.1 and then talks to
the server as "same-origin"). The defences here, in the order a request meets them:

1. Host header: must name this server: 127.0.0.1, localhost, [::1], the address the connection arrived
   on, or a name the operator listed; with the server's port. A rebinding page sends its own domain.
2. Origin: a browser request from another origin is refused and gets no CORS headers; only the same
   origin and origins the operator listed pass. Preflights (OPTIONS) are answered only for listed origins.
3. API key: when one is set, ``Authorization: Bearer <key>`` (or Anthropic's ``x-api-key``) compared in constant
   time.

The bind policy: loopback by default; any other address needs an explicit switch *and* a key.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import QuantDeskError
from app.server.params import ApiError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MIN_LAN_KEY_CHARS = 16
CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type, X-Api-Key, Anthropic-Version"


class UnsafeBind(QuantDeskError):
    """The server was asked to listen where it would be unsafe, without the switches that make it deliberate."""


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # any other name may resolve anywhere: treat it as the LAN


def check_bind(host: str, *, allow_lan: bool, api_key: str | None) -> None:
    """Refuse to listen beyond this machine unless the operator asked for it and set a key."""
    if is_loopback(host):
        return
    if not allow_lan:
        raise UnsafeBind(f"refusing to listen on {host}: that is reachable from other machines",
                         "add --allow-lan and an API key to expose the server on the network, "
                         "or leave --host at 127.0.0.1")
    if not api_key:
        raise UnsafeBind(f"refusing to listen on {host} without an API key: anyone on the network could use it",
                         "set --api-key or QUANTDESK_API_KEY")
    if len(api_key) < MIN_LAN_KEY_CHARS:
        raise UnsafeBind(f"the API key is too short to expose on the network ({len(api_key)} characters, "
                         f"need {MIN_LAN_KEY_CHARS})",
                         "make one with: python -c 'import secrets; print(secrets.token_urlsafe())'")


def host_literal(address: str) -> str:
    """An address as it appears in a Host header ([::1] for IPv6)."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def _header(scope: Scope, name: bytes) -> str | None:
    values: list[bytes] = [v for k, v in scope.get("headers", ()) if k == name]
    if len(values) != 1:
        return None if not values else "\0several"  # a repeated Host or Origin is never legitimate
    return values[0].decode("latin-1")


class Guard:
    """ASGI middleware: Host, Origin/CORS and API-key checks before the app sees a request."""

    def __init__(self, app: ASGIApp, *, api_key: str | None = None, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self._key = api_key.encode("utf-8") if api_key else None
        self._names = {n.lower() for n in (*LOOPBACK_NAMES, *(host_literal(h) for h in allowed_hosts))}
        self._origins = {o.rstrip("/").lower() for o in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # the API has none; refuse rather than let one skip the checks
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        try:
            host = self._check_host(scope)
            origin = self._check_origin(scope, host)
            if scope["method"] == "OPTIONS":
                await _send_preflight(send, origin)
                return
            self._check_key(scope)
        except ApiError as exc:
            await send_error(send, exc)
            return
        if origin is None:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *_cors_headers(origin)]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def _check_host(self, scope: Scope) -> str:
        host = _header(scope, b"host")
        server = scope.get("server") or ("", 0)
        port = server[1]
        names = self._names | {host_literal(server[0]).lower()}
        allowed = {f"{name}:{port}" for name in names} | (names if port == 80 else set())
        if host is None or host.lower() not in allowed:
            raise ApiError(403, "this server answers only to its own address (the Host header names another "
                                "site; DNS rebinding is refused)", type="permission_error", code="host_not_allowed")
        return host

    def _check_origin(self, scope: Scope, host: str) -> str | None:
        """None for a same-origin or non-browser request; the origin when it is one the operator listed."""
        origin = _header(scope, b"origin")
        if origin is None:
            fetch_site = _header(scope, b"sec-fetch-site")
            if fetch_site in ("cross-site", "same-site"):  # a browser that left out Origin (e.g. a no-cors GET)
                raise _cross_origin_refused()
            return None
        origin = origin.rstrip("/").lower()
        if origin == f"http://{host.lower()}":
            return None
        if origin in self._origins:
            return origin
        raise _cross_origin_refused()

    def _check_key(self, scope: Scope) -> None:
        if self._key is None:
            return
        auth = _header(scope, b"authorization")
        if auth is None and _header(scope, b"x-api-key") is not None:  # Anthropic's clients send the key so
            auth = f"Bearer {_header(scope, b'x-api-key')}"
        scheme, _, token = (auth or "").partition(" ")
        # compare_digest on bytes: constant time in the length of the secret whatever the input.
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode("utf-8", "replace"),
                                                                 self._key):
            raise ApiError(401, "missing or incorrect API key (send Authorization: Bearer <key>, or x-api-key)",
                           code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


def _cross_origin_refused() -> ApiError:
    return ApiError(403, "cross-origin requests are refused; start the server with --allow-origin to allow "
                         "a web page you trust", type="permission_error", code="origin_not_allowed")


def _cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


async def _send_preflight(send: Send, origin: str | None) -> None:
    headers = [(b"content-length", b"0")]
    if origin is not None:
        headers += [*_cors_headers(origin), (b"access-control-allow-methods", CORS_METHODS.encode()),
                    (b"access-control-allow-headers", CORS_HEADERS.encode()),
                    (b"access-control-max-age", b"600")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def send_error(send: Send, error: ApiError) -> None:
    """Answer an ApiError straight on the ASGI channel (used before the app is reached)."""
    body = json.dumps(error.body()).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
