"""What ``studio serve`` accepts: where it may listen, its key, and the limits of one request. Light (stdlib); read by
the command that starts a server (``engine.export.serve_jobs``: refused in one line before anything is queued) and by
the server itself (``engine.trainer.serve``: the same rules, enforced on every request).

- Where: ``--host`` (default 127.0.0.1) and ``--port`` (0 to 65535; 0: any free port). A host that is not loopback
  needs a key: the page's own rule (``studio webui`` needs a login there), since anyone who reaches the port could
  otherwise use the model and the machine's CPU or GPU.
- The key: ``--api-key-env NAME`` names the environment variable that holds it. The value is never written anywhere:
  the registry keeps the server's argv, which names the variable only, and the scheduler hands the value to the
  server in memory (the run's ``pass_env.json`` lists the name). Clients send it as OpenAI's
  ``Authorization: Bearer KEY``; the Chat tab's client of a registry server reads the same variable from the
  studio's own environment (``studio.tabs.chat_remote``), so a key typed on a command line (seen by ``ps``, kept in
  shell histories) or stored in a file the page could read is never needed.
- One request: a body of at most ``STUDIO_SERVE_MAX_BODY_MB`` (default 4) MiB, counted from ``Content-Length`` and
  while reading; JSON nested at most ``MAX_JSON_DEPTH`` levels; at most ``STUDIO_SERVE_MAX_MESSAGES`` (default 1000)
  messages; the prompt's tokens plus ``max_tokens`` within the model's context (``max_position_embeddings``). One
  generation runs at a time; up to ``MAX_WAITING`` more wait their turn, later ones get a 503.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket

from engine.export.messages import ExportError, message

HOST = "127.0.0.1"
BACKLOG = 256  # pending connections the listening socket queues (the kernel caps it at net.core.somaxconn)
MAX_JSON_DEPTH = 64
MAX_WAITING = 256
ENV_MAX_BODY_MB = "STUDIO_SERVE_MAX_BODY_MB"
ENV_MAX_MESSAGES = "STUDIO_SERVE_MAX_MESSAGES"
DEFAULT_MAX_BODY_MB = 4.0
DEFAULT_MAX_MESSAGES = 1000


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, ``localhost``): the one rule of both servers, the
    page's (``studio.settings``) and ``studio serve``'s."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_host(host: str) -> str:
    """The address a client on this machine reaches a server bound to ``host`` at (a wildcard: loopback)."""
    if host in ("", "0.0.0.0"):
        return HOST
    return "::1" if host == "::" else host


def url(host: str, port: int) -> str:
    """The server's base URL as a client on this machine calls it."""
    h = local_host(host)
    return f"http://{f'[{h}]' if ':' in h else h}:{port}/v1"


def max_body_bytes(env: dict[str, str] | None = None) -> int:
    return int(_positive(env, ENV_MAX_BODY_MB, DEFAULT_MAX_BODY_MB) * 2**20)


def max_messages(env: dict[str, str] | None = None) -> int:
    return int(_positive(env, ENV_MAX_MESSAGES, DEFAULT_MAX_MESSAGES, integer=True))


def _positive(env: dict[str, str] | None, name: str, default: float, integer: bool = False) -> float:
    text = (os.environ if env is None else env).get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = 0
    if not value > 0 or value != value or value == float("inf"):
        raise ExportError(message("export.serve_bad_setting", name=name, value=text))
    return value


def check_port(port: int) -> int:
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ExportError(message("export.serve_bad_port", port=port))
    return port


def check_key(host: str, api_key_env: str | None, env: dict[str, str] | None = None) -> str | None:
    """The key (the value of ``api_key_env``), or None when no key is asked for on a loopback host; ExportError
    naming the fix for a non-loopback host without one, a bad variable name or a variable that is not set."""
    env = os.environ if env is None else env
    if not api_key_env:
        if not is_loopback(host):
            raise ExportError(message("export.serve_needs_key", host=host))
        return None
    if not api_key_env.isidentifier():
        raise ExportError(message("export.serve_bad_key_env", name=api_key_env))
    key = env.get(api_key_env, "")
    if not key.strip():
        raise ExportError(message("export.serve_key_unset", name=api_key_env))
    return key


def bind_problem(host: str, port: int) -> ExportError | None:
    """Why a server could not listen on ``host:port`` now (busy, or an address this machine does not have), or None.
    As the server binds: SO_REUSEADDR, so connections in TIME_WAIT do not count."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return ExportError(message("export.serve_bad_host", host=host, error=getattr(exc, "strerror", None) or exc))
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return ExportError(message("export.port_busy", port=port, host=host))
            return ExportError(message("export.serve_bad_host", host=host, error=exc.strerror or exc))
    return None


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket (``BACKLOG`` pending connections), bound before the model answers."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock
