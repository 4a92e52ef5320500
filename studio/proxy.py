"""The reverse proxy in front of the page: the client's address and, in team mode, the account it has logged in.

Believed only from the proxies the operator names (``STUDIO_TRUSTED_PROXIES``, addresses or networks). A request
whose TCP peer is one of them gets its client address from ``X-Forwarded-For`` (the right-most address that is not
itself a named proxy, as uvicorn reads it) and its scheme from ``X-Forwarded-Proto``; and with
``STUDIO_PROXY_USER_HEADER`` set (e.g. ``X-Forwarded-User``: nginx's ``auth_request`` / ``auth_basic``, or
oauth2-proxy, in front) the account that header names is logged in for the request (``studio.guard.LoginGuard``
gives it a session; an unknown name is refused). From any other peer both headers are ignored and the user header
is removed, so nobody logs in by sending it. uvicorn is told to believe nobody (``studio.app`` sets
``FORWARDED_ALLOW_IPS`` empty): this middleware, outermost, is the one place that reads these headers.

Light: stdlib only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

SCOPE_USER = "studio.proxy_user"  # the ASGI scope's key for the account the proxy vouches for


def _header(headers: Iterable, name: bytes) -> bytes | None:
    return next((v for k, v in headers if k.lower() == name), None)


class TrustedProxy:
    """ASGI middleware; with no proxies named it only removes the user header."""

    def __init__(self, app, proxies: Iterable[str] = (), user_header: str = ""):
        self.app = app
        self.networks = tuple(ipaddress.ip_network(p, strict=False) for p in proxies)
        self.user_header = user_header.strip().lower().encode("latin-1")

    def trusted(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.networks)

    def client(self, forwarded_for: bytes) -> str | None:
        """The client ``X-Forwarded-For`` names: the right-most hop not a named proxy (the left-most when all are)."""
        hops = [h.strip() for h in forwarded_for.decode("latin-1").split(",") if h.strip()]
        for hop in reversed(hops):
            if not self.trusted(hop):
                return hop
        return hops[0] if hops else None

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = scope.get("headers") or []
        peer = (scope.get("client") or ("", 0))[0]
        if not self.trusted(peer):
            if self.user_header and _header(headers, self.user_header) is not None:
                scope = {**scope, "headers": [(k, v) for k, v in headers if k.lower() != self.user_header]}
            return await self.app(scope, receive, send)
        scope = dict(scope)
        forwarded = _header(headers, b"x-forwarded-for")
        if forwarded and (client := self.client(forwarded)):
            scope["client"] = (client, 0)
        proto = (_header(headers, b"x-forwarded-proto") or b"").decode("latin-1").strip().lower()
        if proto in ("http", "https"):
            secure = proto == "https"
            scope["scheme"] = ("wss" if secure else "ws") if scope["type"] == "websocket" else proto
        if self.user_header:
            user = (_header(headers, self.user_header) or b"").decode("utf-8", "replace").strip()
            if user:
                scope[SCOPE_USER] = user
        return await self.app(scope, receive, send)
