"""Safe by default: the dashboard's guard, as one ASGI middleware.

- A token, when set, is checked on every request: an ``Authorization: Bearer`` header
  (the scheme in any case), or the HttpOnly, SameSite=Strict cookie that a browser gets
  by presenting the token once as ``?token=`` (EventSource cannot send headers; the
  cookie rides along). Either is compared in constant time.
- On a local bind only local Host names are answered (a web page elsewhere cannot reach
  the dashboard through DNS rebinding).
- Pages are read-only: a method other than GET or HEAD is refused.
- Except ``POST /hooks/NAME`` (``ui/hooks.py``): a webhook's sender has no token, and
  its request is checked by its signature instead, so the token is not asked for there.
- Every answer carries a strict Content-Security-Policy (no inline script, scripts from
  the dashboard only), ``nosniff``, no framing and no referrer.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from lirun.schedules.webhooks import HOOK_PATH

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "lirun_ui_token"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def is_local_host(host: str) -> bool:
    """Whether binding ``host`` keeps the dashboard on this machine."""
    return host in LOCAL_HOSTS or host.startswith("127.")


def is_hook(scope: Scope) -> bool:
    """Whether the request is a webhook delivery: ``POST /hooks/NAME`` (one segment)."""
    path = str(scope.get("path", ""))
    name = path[len(HOOK_PATH) :]
    return (
        scope["method"] == "POST" and path.startswith(HOOK_PATH) and bool(name) and "/" not in name
    )


def _host_name(value: str) -> str:
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def bearer_credentials(header: str) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, None for any other. The
    scheme's name is case-insensitive (RFC 7235: ``bearer`` and ``BEARER`` are the same)."""
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credentials.strip(" \t") or None


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class Guard:
    """Token, Host and method checks, and the security headers on every answer."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, allowed_hosts: Collection[str] | None
    ) -> None:
        self.app = app
        self.token = token or None
        self.allowed_hosts = frozenset(allowed_hosts) if allowed_hosts is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(send)
            return
        await self.app(scope, receive, _with_headers(send))

    def _refusal(
        self, scope: Scope, headers: dict[str, str]
    ) -> Callable[[Send], Awaitable[None]] | None:
        host = _host_name(headers.get("host", ""))
        if self.allowed_hosts is not None and host not in self.allowed_hosts:
            return _plain(400, f"this dashboard answers only for {sorted(self.allowed_hosts)}")
        if is_hook(scope):
            return None  # the hook checks the request's signature (ui/hooks.py)
        if scope["method"] not in ("GET", "HEAD"):
            return _plain(405, "the dashboard is read-only")
        if self.token is None:
            return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        presented = next((v for k, v in query if k == "token"), None)
        if presented is not None:
            if not token_matches(presented, self.token):
                return _plain(401, "wrong token")
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            # "/" + the path without leading slashes: "//host" would leave the dashboard.
            location = "/" + scope["path"].lstrip("/") + (f"?{rest}" if rest else "")
            return _set_cookie_and_redirect(location, self.token)
        if token_matches(bearer_credentials(headers.get("authorization", "")), self.token):
            return None
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            cookie = SimpleCookie()
        morsel = cookie.get(COOKIE)
        if morsel is not None and token_matches(morsel.value, self.token):
            return None
        return _plain(401, "this dashboard needs its token: open it once as /?token=TOKEN")


def _with_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in HEADERS if k not in present]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


def _plain(status: int, text: str) -> Callable[[Send], Awaitable[None]]:
    body = (text + "\n").encode()

    async def respond(send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    *HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return respond


def _set_cookie_and_redirect(location: str, token: str) -> Callable[[Send], Awaitable[None]]:
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"

    async def respond(send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1", "replace")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"content-length", b"0"),
                    *HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    return respond
