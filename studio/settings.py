"""Where and how the studio is served: host, port, credentials, workspace.

Sources, later wins: defaults (127.0.0.1:7860, no auth), environment (``STUDIO_HOST``, ``STUDIO_PORT``,
``STUDIO_AUTH=user:pass``, ``STUDIO_HOME``, ``STUDIO_MAX_UPLOAD_MB``, ``STUDIO_TRUSTED_PROXIES``,
``STUDIO_SESSION_HOURS``, ``STUDIO_PROXY_USER_HEADER``), command-line flags. A workspace with accounts
(``studio users``, engine.core.accounts) is team mode: each person logs in with their own account (or the trusted
proxy names them, ``studio.proxy``), and ``--auth`` is refused. A non-loopback host without
credentials is refused: anyone on the network could otherwise start processes on this machine. What the page may use
beyond that (reward code, a model's own code, secrets, private hosts: ``STUDIO_PAGE_CODE``,
``STUDIO_PAGE_REMOTE_CODE``, ``STUDIO_PAGE_SECRETS``, ``STUDIO_PAGE_HOSTS``) is the engine's rule,
``engine.core.page_trust``, which every caller obeys; a malformed setting is refused here, at start, naming the
variable. Light: the stdlib and that module.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from dataclasses import dataclass

from engine.core import accounts, page_trust
from engine.export.serve_rules import is_loopback  # one rule for the page and `studio serve`

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
DEFAULT_MAX_UPLOAD_MB = 200
DEFAULT_SESSION_HOURS = 12.0
AUTH_HELP = (
    "set credentials with --auth USER:PASS or the environment variable STUDIO_AUTH=USER:PASS (or bind to 127.0.0.1)"
)


TEAM_AUTH = "the workspace has accounts, and the page logs in with them"


class SettingsError(ValueError):
    """Settings that must not be served; the message says how to fix them."""


@dataclass(frozen=True)
class Settings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: tuple[str, str] | None = None
    team: bool = False  # accounts exist (engine.core.accounts): each logs in with their own
    home: str = ""
    build_demo: bool = True
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_MB * 2**20
    trusted_proxies: tuple[str, ...] = ()  # addresses / networks whose X-Forwarded-For is believed
    session_s: float = DEFAULT_SESSION_HOURS * 3600  # a login lasts this long (studio.guard)
    proxy_user_header: str = ""  # team mode: the trusted proxies name the logged-in account in it (studio.proxy)

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def parse_auth(text: str, source: str) -> tuple[str, str]:
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise SettingsError(f"{source} must be USER:PASS with both parts non-empty (got {text!r:.40})")
    return user, password


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="studio webui", description="Serve the studio page.")
    p.add_argument("--host", default=None, help=f"address to bind (default $STUDIO_HOST or {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=None, help=f"port (default $STUDIO_PORT or {DEFAULT_PORT})")
    p.add_argument("--auth", default=None, metavar="USER:PASS", help="require this login (default $STUDIO_AUTH)")
    p.add_argument("--home", default=None, help="workspace folder (default $STUDIO_HOME or ~/.studio)")
    p.add_argument("--no-demo", action="store_true", help="do not build the demo workspace on start")
    return p


def load(argv: list[str] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Settings from env + flags; raises SettingsError (with the fix) on a bad or unsafe combination."""
    env = dict(os.environ if env is None else env)
    args = parser().parse_args(argv or [])
    host = args.host or env.get("STUDIO_HOST") or DEFAULT_HOST
    port_text = str(args.port if args.port is not None else env.get("STUDIO_PORT") or DEFAULT_PORT)
    try:
        port = int(port_text)
    except ValueError:
        raise SettingsError(f"STUDIO_PORT must be a number (got {port_text!r})") from None
    if not 1 <= port <= 65535:
        raise SettingsError(f"port must be between 1 and 65535 (got {port})")
    auth = None
    if args.auth:
        auth = parse_auth(args.auth, "--auth")
    elif env.get("STUDIO_AUTH"):
        auth = parse_auth(env["STUDIO_AUTH"], "STUDIO_AUTH")
    home = args.home or env.get("STUDIO_HOME") or ""
    try:
        team = accounts.team_mode(home or None)
    except accounts.AccountError as exc:
        raise SettingsError(str(exc)) from None
    if team and auth is not None:
        raise SettingsError(f"{TEAM_AUTH} (`studio users list`): drop --auth and STUDIO_AUTH")
    if not is_loopback(host) and auth is None and not team:
        raise SettingsError(f"refusing to serve on {host} without a login: {AUTH_HELP}")
    try:
        page_trust.check_settings(env)
    except page_trust.PageTrustError as exc:
        raise SettingsError(str(exc)) from None
    proxies = trusted_proxies(env)
    return Settings(
        host=host,
        port=port,
        auth=auth,
        team=team,
        home=home,
        build_demo=not args.no_demo,
        max_upload_bytes=max_upload_bytes(env),
        trusted_proxies=proxies,
        session_s=session_s(env),
        proxy_user_header=proxy_user_header(env, proxies, team),
    )


def proxy_user_header(env: dict[str, str], proxies: tuple[str, ...], team: bool) -> str:
    """``STUDIO_PROXY_USER_HEADER``: the header in which the trusted reverse proxy (nginx's ``auth_request``,
    oauth2-proxy) names the account it logged in; believed only from ``STUDIO_TRUSTED_PROXIES`` and only in team
    mode, so it is refused without either."""
    name = str(env.get("STUDIO_PROXY_USER_HEADER") or "").strip()
    if not name:
        return ""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}", name):
        raise SettingsError(
            f"STUDIO_PROXY_USER_HEADER must be a header name such as X-Forwarded-User (got {name!r:.60})"
        )
    if not proxies:
        raise SettingsError(
            "STUDIO_PROXY_USER_HEADER needs STUDIO_TRUSTED_PROXIES: the proxies whose header is believed"
        )
    if not team:
        raise SettingsError("STUDIO_PROXY_USER_HEADER names accounts: add them first (`studio users add NAME`)")
    return name


def session_s(env: dict[str, str] | None = None) -> float:
    """How long a login lasts, ``STUDIO_SESSION_HOURS`` (default 12): then the page asks for the login again
    (studio.guard). A value that is not a positive number of hours is refused with the variable named."""
    env = os.environ if env is None else env
    text = str(env.get("STUDIO_SESSION_HOURS") or DEFAULT_SESSION_HOURS)
    try:
        hours = float(text)
    except ValueError:
        hours = 0.0
    if not 0 < hours < float("inf"):
        raise SettingsError(f"STUDIO_SESSION_HOURS must be a positive number of hours (got {text!r:.40})")
    return hours * 3600


def max_upload_bytes(env: dict[str, str] | None = None) -> int:
    """The upload cap, ``STUDIO_MAX_UPLOAD_MB`` (default 200): gradio refuses a bigger HTTP upload, and the Datasets
    tab refuses to store a bigger file. A value that is not a positive number is refused with the variable named."""
    env = os.environ if env is None else env
    text = str(env.get("STUDIO_MAX_UPLOAD_MB") or DEFAULT_MAX_UPLOAD_MB)
    try:
        mb = float(text)
    except ValueError:
        mb = 0.0
    if not mb > 0:
        raise SettingsError(f"STUDIO_MAX_UPLOAD_MB must be a positive number of MiB (got {text!r})")
    return int(mb * 2**20)


def trusted_proxies(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """``STUDIO_TRUSTED_PROXIES``: the reverse proxies (addresses or networks, separated by commas) whose
    ``X-Forwarded-For`` names the client. Unset: nobody's, not even 127.0.0.1's (uvicorn would otherwise believe any
    local process, and a header rotated per request would give each wrong login a fresh throttle budget). ``*`` is
    refused: it would let every client choose its own address."""
    env = os.environ if env is None else env
    out = []
    for item in str(env.get("STUDIO_TRUSTED_PROXIES") or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise SettingsError(
                f"STUDIO_TRUSTED_PROXIES must list IP addresses or networks separated by commas (got {item!r:.60})"
            ) from None
        out.append(item)
    return tuple(out)
