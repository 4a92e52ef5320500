"""What the server tells a client that has not logged in: the login page and nothing else, and wrong logins throttled.

Gradio (6.31) serves its login page from ``/`` with ``window.gradio_api_info`` embedded: every endpoint with its
parameters' defaults and choices, i.e. the workspace's absolute paths, the run ids and the dataset names, to anyone
who can reach the port (``/gradio_api/info`` itself answers 401). And ``POST /login`` answers as fast as it can, for
ever. ``LoginGuard`` is an ASGI middleware given to gradio's FastAPI app (``launch(app_kwargs=...)``, see
``studio.app.launch_kwargs``) that, when the app has a login:

- answers 401 to every request without a valid login cookie except what the login page itself loads (``/``, its
  scripts, styles, fonts and icons: ``PUBLIC_PATHS``, ``PUBLIC_PREFIXES``) and ``POST /login``: gradio leaves
  ``/gradio_api/cancel``, ``/reset``, ``/heartbeat/<any>``, ``/app_id``, ``/token``, ``/user``, ``/startup-events``
  open, and a route a gradio upgrade adds is closed until listed here (``startup-events`` answers the one call
  ``launch`` makes before its startup events have run);
- blanks the API info in every HTML answer to a request without a valid login cookie (the page's client then asks
  ``/gradio_api/info``, which needs the login); if the info cannot be blanked (gradio's template changed), the page
  is refused rather than served with it;
- throttles failed logins per client address: ``FREE_FAILURES`` wrong ones in a row are answered as usual, then each
  further one closes logins from that address for ``BASE_S * 2**k`` seconds (k = 0, 1, 2, ...; at most ``CAP_S``),
  during which every ``POST /login`` from it, right or wrong, gets 429 with ``Retry-After``. A right login resets the
  count. The account name tried is throttled the same way (``account:NAME``), so guessing one account's password
  from many addresses gets no more tries than from one. Failures and refusals are logged (logger ``studio.login``,
  to stderr);
- ends sessions: a login cookie older than ``session_s`` (``STUDIO_SESSION_HOURS``, see ``studio.settings``) is
  forgotten (gradio's own token table too, so ``/`` shows the login page again), and so is, in team mode, one whose
  account was removed or whose password changed since it logged in. An open page learns it from its next request's
  401 (a timer's tick, a click) and reloads onto the login form (``SESSION_END_HEAD``, in the page's head).

- logs in, in team mode, the account a trusted reverse proxy names in its user header (``studio.proxy``): the
  request carries a session of that account's (minted on its first request, again when one ends, with an audit
  entry), and a name that is no account is refused (403).

Light: stdlib, starlette (gradio's web framework), engine.core (accounts, audit) and studio.proxy. The address is the
TCP peer, or the client a proxy named in ``STUDIO_TRUSTED_PROXIES`` forwards for (``studio.proxy``: nobody else's
``X-Forwarded-For`` is believed), so behind an unnamed reverse proxy every client shares its budget.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.requests import cookie_parser

from engine.core import accounts, audit
from studio.proxy import SCOPE_USER

FREE_FAILURES = 3
BASE_S = 1.0
CAP_S = 600.0
FORGET_S = 3600.0  # an address idle this long after its last failure starts again from zero
MAX_ADDRESSES = 10_000  # the table's bound; the oldest unblocked addresses are forgotten first
MAX_INFLIGHT = 32  # concurrent login attempts from one address (one once it has failed)
SESSION_S = 12 * 3600.0  # a login lasts this long (studio.settings: STUDIO_SESSION_HOURS)
MAX_LOGIN_BODY = 16 << 10  # the login form read to find the account name

# What a browser without the login fetches to show the login form (recorded from Chromium on gradio 6.31: ``/``,
# ``/static/...``, ``/assets/...``, ``/theme.css``); GET / HEAD only. Everything else needs the cookie.
PUBLIC_PATHS = frozenset(
    {"/", "/favicon.ico", "/theme.css", "/gradio_api/theme.css", "/robots.txt", "/manifest.json", "/pwa_icon"}
)
PUBLIC_PREFIXES = ("/static/", "/assets/", "/svelte/", "/pwa_icon/")
UNAUTHORIZED = {"detail": "Not authenticated: log in first."}

log = logging.getLogger("studio.login")
if not log.handlers:  # the server's log is its stderr; uvicorn configures only its own loggers
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(asctime)s studio.login %(levelname)s: %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False

# The page's head (studio.app, with a login): a 401 answer to the loaded page (its app drawn: ``#start-btn``) means
# the session ended, and the page reloads onto the login form; the login form's own 401s (before the app is drawn)
# never reload it.
SESSION_END_HEAD = """<script>
(() => {
  const fetch0 = window.fetch;
  let gone = false;
  window.fetch = async (...args) => {
    const answer = await fetch0(...args);
    if (answer.status === 401 && !gone && document.querySelector("#start-btn")) {
      gone = true;
      window.location.reload();
    }
    return answer;
  };
})();
</script>"""

API_INFO = re.compile(rb"window\.gradio_api_info\s*=\s*.*?;\s*</script>", re.DOTALL)
API_INFO_BLANK = b"window.gradio_api_info = null;</script>"
# What only API info carries; an HTML answer that still holds it after blanking is not sent.
API_INFO_MARKS = (b"named_endpoints", b"unnamed_endpoints", b"parameter_default", b"example_input")


@dataclass
class _Client:
    failures: int = 0
    blocked_until: float = 0.0
    last: float = 0.0
    inflight: int = 0
    refusal_logged: bool = False


class LoginThrottle:
    """Failed logins per address with exponential back-off. Thread-safe; ``clock`` is injectable for tests."""

    def __init__(
        self,
        free: int = FREE_FAILURES,
        base_s: float = BASE_S,
        cap_s: float = CAP_S,
        forget_s: float = FORGET_S,
        max_addresses: int = MAX_ADDRESSES,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.free, self.base_s, self.cap_s, self.forget_s = free, base_s, cap_s, forget_s
        self.max_addresses, self.clock = max_addresses, clock
        self._clients: dict[str, _Client] = {}
        self._lock = threading.Lock()

    def _get(self, addr: str, now: float) -> _Client:
        c = self._clients.get(addr)
        if c is not None and not c.inflight and now > c.blocked_until and now - c.last > self.forget_s:
            c = None  # idle long enough: start again
        if c is None:
            if len(self._clients) >= self.max_addresses:
                self._prune(now)
            c = self._clients[addr] = _Client()
        return c

    def _prune(self, now: float) -> None:
        idle = sorted((c.last, a) for a, c in self._clients.items() if not c.inflight and now > c.blocked_until)
        for _, a in idle[: max(1, len(self._clients) - self.max_addresses // 2)]:
            del self._clients[a]
        if len(self._clients) >= self.max_addresses:  # every address blocked: keep the table bounded anyway
            for a in sorted(self._clients, key=lambda a: self._clients[a].last)[: self.max_addresses // 2]:
                if not self._clients[a].inflight:
                    del self._clients[a]

    def begin(self, addr: str) -> float:
        """0 when a login attempt from ``addr`` may go ahead (call ``end`` after it), else the seconds to wait."""
        with self._lock:
            now = self.clock()
            c = self._get(addr, now)
            if now < c.blocked_until:
                return c.blocked_until - now
            if c.inflight >= (1 if c.failures else MAX_INFLIGHT):
                return max(self.base_s, 1.0)
            c.inflight += 1
            return 0.0

    def end(self, addr: str, ok: bool | None) -> float:
        """Record the attempt's outcome (True: right, False: wrong, None: neither, e.g. a malformed form); the
        back-off the address has now (0 when none)."""
        with self._lock:
            now = self.clock()
            c = self._get(addr, now)
            c.inflight = max(0, c.inflight - 1)
            if ok is None:
                return 0.0
            if ok:
                del self._clients[addr]
                return 0.0
            c.failures += 1
            c.last = now
            if c.failures <= self.free:
                return 0.0
            wait = min(self.cap_s, self.base_s * 2 ** min(c.failures - self.free - 1, 62))
            c.blocked_until = now + wait
            c.refusal_logged = False
            return wait

    def failures(self, addr: str) -> int:
        with self._lock:
            c = self._clients.get(addr)
            return c.failures if c else 0

    def first_refusal(self, addr: str) -> bool:
        """True once per back-off window (so an attacker's thousands of refused attempts log one line)."""
        with self._lock:
            c = self._clients.get(addr)
            if c is None or c.refusal_logged:
                return False
            c.refusal_logged = True
            return True


def _token(scope, app) -> str | None:
    """The login cookie gradio issued that the request carries (the same test as gradio's own
    ``get_current_user``), or None."""
    cookie_id = getattr(app, "cookie_id", None)
    tokens = getattr(app, "tokens", None) or {}
    if cookie_id is None:
        return None
    raw = b"; ".join(v for k, v in scope.get("headers") or () if k == b"cookie").decode("latin-1")
    if not raw:
        return None
    cookies = cookie_parser(raw)
    token = cookies.get(f"access-token-{cookie_id}") or cookies.get(f"access-token-unsecure-{cookie_id}")
    return token if token and token in tokens else None


def _account_hash(name: str) -> str | None:
    """The password hash of account ``name`` now ("" outside team mode, None for no such account)."""
    try:
        found = accounts.load()
    except accounts.AccountError:  # a damaged accounts file ends sessions rather than keeping them blindly
        return None
    if not found:
        return ""
    account = found.get(name)
    return account.hash if account else None


def _with_cookie(scope, name: str, value: str) -> dict:
    """``scope`` whose one cookie header also carries ``name=value`` (last, so it wins over one the client sent)."""
    headers = scope.get("headers") or []
    raw = b"; ".join(v for k, v in headers if k == b"cookie").decode("latin-1")
    cookie = f"{raw}; {name}={value}" if raw else f"{name}={value}"
    return {**scope, "headers": [*(h for h in headers if h[0] != b"cookie"), (b"cookie", cookie.encode("latin-1"))]}


def _issued_tokens(headers) -> list[str]:
    """The login tokens a ``POST /login`` answer sets (gradio's ``access-token-*`` cookies)."""
    found = []
    for k, v in headers or ():
        if k.lower() == b"set-cookie":
            name, _, rest = v.decode("latin-1").partition("=")
            if name.startswith("access-token"):
                found.append(rest.split(";", 1)[0].strip().strip('"'))
    return found


def is_public(method: str, path: str) -> bool:
    """A request the login page needs and that reveals nothing without the login."""
    if method == "POST":
        return path.rstrip("/") == "/login"
    if method not in ("GET", "HEAD"):
        return False
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _launch_call(gradio_app, method: str, path: str) -> bool:
    """``Blocks.launch`` itself asks ``/gradio_api/startup-events`` once, without a cookie, and refuses to serve if
    that fails; once the startup events have run, the route answers 401 like any other."""
    startup = method == "GET" and path.rstrip("/") == "/gradio_api/startup-events"
    return startup and getattr(gradio_app, "startup_events_triggered", True) is False


def _header(headers, name: bytes) -> bytes:
    return next((v for k, v in headers if k.lower() == name), b"")


async def _send_json(send, status: int, body: dict, headers: list | None = None) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class LoginGuard:
    """ASGI middleware; a no-op for apps without a login (``app.auth`` None, e.g. bound to 127.0.0.1)."""

    def __init__(self, app, throttle: LoginThrottle | None = None, session_s: float = SESSION_S, clock=time.time):
        self.app = app
        self.throttle = throttle or LoginThrottle()
        self.session_s, self.clock = session_s, clock
        self._sessions: dict[str, tuple[float, str | None]] = {}  # token -> (issued, its account's hash then)
        self._proxied: dict[str, str] = {}  # account -> the token of its session through the trusted proxy
        self._lock = threading.Lock()

    def _logged_in(self, scope, gradio_app) -> bool:
        """A valid login cookie whose session has not ended (expired, account removed, password changed); an ended
        one is removed from gradio's token table too."""
        token = _token(scope, gradio_app)
        if token is None:
            return False
        name = str(gradio_app.tokens.get(token))
        now = self.clock()
        with self._lock:
            session = self._sessions.get(token)
        if session is None:  # issued before this guard saw it: its session starts now
            session = (now, _account_hash(name))
            with self._lock:
                self._sessions[token] = session
        issued, hash_then = session
        why = None
        if now - issued > self.session_s:
            why = "expired"
        elif hash_then:  # team mode: the account as it was at the login
            hash_now = _account_hash(name)
            why = "account removed" if hash_now is None else "password changed" if hash_now != hash_then else None
        if why is None:
            return True
        with self._lock:
            self._sessions.pop(token, None)
        gradio_app.tokens.pop(token, None)
        log.info("session of %s ended: %s", name, why)
        return False

    async def __call__(self, scope, receive, send):
        gradio_app = scope.get("app")
        if scope["type"] not in ("http", "websocket") or getattr(gradio_app, "auth", None) is None:
            return await self.app(scope, receive, send)
        method, path = scope.get("method", ""), scope.get("path", "")
        if (proxy_user := scope.get(SCOPE_USER)) is not None:
            proxied = self._proxy_session(scope, gradio_app, proxy_user)
            if proxied is not None:
                return await self.app(proxied, receive, send)
            if scope["type"] == "websocket":
                return await send({"type": "websocket.close", "code": 1008})
            detail = f"The proxy logged in {proxy_user[:64]!r}, which is no account of this studio's."
            return await _send_json(send, 403, {"detail": detail})
        if scope["type"] == "http" and method == "POST" and path.rstrip("/") == "/login":
            return await self._login(scope, receive, send)
        if self._logged_in(scope, gradio_app):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":  # closed before accept: the client gets 403
            return await send({"type": "websocket.close", "code": 1008})
        if not is_public(method, path) and not _launch_call(gradio_app, method, path):
            return await _send_json(send, 401, UNAUTHORIZED, [(b"www-authenticate", b"Cookie")])
        return await self._public(scope, receive, send)

    def _proxy_session(self, scope, gradio_app, name: str) -> dict | None:
        """``scope`` carrying a live session of account ``name``, whom the trusted proxy vouches for; None when
        ``name`` is no account (or the workspace has none: the header is for team mode)."""
        hash_now = _account_hash(name)
        cookie_id, tokens = getattr(gradio_app, "cookie_id", None), getattr(gradio_app, "tokens", None)
        if not hash_now or cookie_id is None or tokens is None:
            log.warning("the trusted proxy named %r, which is no account: refused", name[:64])
            return None
        cookie = f"access-token-{cookie_id}"
        with self._lock:
            token = self._proxied.get(name)
        if token is not None:
            scoped = _with_cookie(scope, cookie, token)
            if self._logged_in(scoped, gradio_app):
                return scoped
        token = secrets.token_urlsafe(32)
        tokens[token] = name
        with self._lock:
            self._proxied[name] = token
            self._sessions[token] = (self.clock(), hash_now)
        log.info("%s logged in through the trusted proxy", name)
        audit.record("login", who=name, through="proxy")
        return _with_cookie(scope, cookie, token)

    async def _login(self, scope, receive, send):
        addr = (scope.get("client") or ("?", 0))[0]
        body, replay = await _read_form(receive)
        name = (parse_qs(body.decode("latin-1")).get("username") or [""])[0].strip()[:64]
        keys = [addr] + ([f"account:{name}"] if name else [])  # gradio strips the name as well
        began: list[str] = []
        for key in keys:
            wait = self.throttle.begin(key)
            if wait:
                for k in began:
                    self.throttle.end(k, None)
                return await self._refuse(key, wait, send)
            began.append(key)
        status: list[int] = []
        issued: list[str] = []

        async def send_status(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
                issued.extend(_issued_tokens(message.get("headers")))
            await send(message)

        try:
            await self.app(scope, replay, send_status)
        finally:
            code = status[0] if status else 0
            ok = True if code == 200 else False if code in (400, 401, 403) else None
            backoffs = [self.throttle.end(k, ok) for k in keys]
            if ok:
                now, hash_now = self.clock(), _account_hash(name)
                live = getattr(scope.get("app"), "tokens", None) or {}
                with self._lock:
                    for token in [t for t in self._sessions if t not in live]:  # logged out since
                        del self._sessions[token]
                    for token in issued:
                        self._sessions[token] = (now, hash_now)
            if ok is False:
                log.warning(
                    "failed login from %s for %r (%d in a row from it, %d for the account)%s",
                    addr,
                    name,
                    self.throttle.failures(addr),
                    self.throttle.failures(keys[-1]) if name else 0,
                    f"; logins refused for {max(backoffs):.0f} s" if max(backoffs) else "",
                )

    async def _refuse(self, key: str, wait: float, send):
        account = key.startswith("account:")
        if self.throttle.first_refusal(key):
            log.warning(
                "login %s %s refused: %d failed logins in a row, next attempt allowed in %.0f s",
                "for" if account else "from",
                key.removeprefix("account:"),
                self.throttle.failures(key),
                wait,
            )
        retry = str(max(1, int(wait + 0.999))).encode()
        what = "for this account" if account else "from this address"
        return await _send_json(
            send,
            429,
            {"detail": f"Too many failed logins {what}; try again in {retry.decode()} s."},
            [(b"retry-after", retry)],
        )

    async def _public(self, scope, receive, send):
        """Pass the answer on, with the API info blanked out of HTML (the login page)."""
        held: dict = {}
        chunks: list[bytes] = []

        async def filtered(message):
            if message["type"] == "http.response.start":
                ctype = _header(message.get("headers") or [], b"content-type")
                if not ctype.startswith(b"text/html"):
                    return await send(message)
                held["start"] = message
                return None
            if message["type"] != "http.response.body" or "start" not in held:
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            start, body = held.pop("start"), b"".join(chunks)
            headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
            if _header(headers, b"content-encoding"):
                start, body = _refused(), b"login page withheld: compressed before it could be checked"
                headers = start["headers"]
            else:
                body = API_INFO.sub(API_INFO_BLANK, body)
                if any(mark in body for mark in API_INFO_MARKS):
                    log.error("login page withheld: gradio's API info could not be removed from %s", scope["path"])
                    start, body = _refused(), b"login page withheld: it would have shown the API description"
                    headers = start["headers"]
            if scope.get("method") != "HEAD":
                headers = [*headers, (b"content-length", str(len(body)).encode())]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return None

        await self.app(scope, receive, filtered)


async def _read_form(receive, limit: int = MAX_LOGIN_BODY):
    """The login form's body (at most ``limit`` bytes read; the rest is passed on unread) and a ``receive`` that
    hands gradio the same messages again."""
    messages, size = [], 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body") or size > limit:
            break
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")[:limit]

    async def replay():
        return messages.pop(0) if messages else await receive()

    return body, replay


def _refused() -> dict:
    return {"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]}
