"""Whether the hub can be reached, asked once per process with a short timeout.

Without this, a machine that cannot reach the hub (no network, a firewall, a mirror that is down) waits for
``huggingface_hub``'s retries on every hub id (about 24 s and eleven retry lines) and then reads the failure as an
answer. ``reachable()`` asks ``HF_ENDPOINT`` once (one ``HEAD`` of its root within ``STUDIO_HUB_TIMEOUT`` s,
default 2; any HTTP answer, even an error code, means a server is there); when nothing answers it prints one line
saying so (stderr) and the process works offline from then on: ``engine.models.resolve`` reads the cache, then
Studio's table of published configs; ``engine.data.hub`` and the check before launch say the hub cannot be
reached. ``HF_HUB_OFFLINE`` set means offline without asking. Nothing is written to the environment, so runs
started later decide for themselves.

Light: stdlib (``huggingface_hub.constants`` for the endpoint, imported inside the function).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.error
import urllib.request

from engine.core.messages import Message
from engine.models.messages import message

DEFAULT_ENDPOINT = "https://huggingface.co"  # huggingface_hub's own, when HF_ENDPOINT is not set
PROBE_TIMEOUT_S = 2.0  # the default; STUDIO_HUB_TIMEOUT (seconds) for a slow link or proxy


def probe_timeout() -> float:
    try:
        return max(0.1, float(os.environ.get("STUDIO_HUB_TIMEOUT", PROBE_TIMEOUT_S)))
    except ValueError:
        return PROBE_TIMEOUT_S


REASK_S = 300.0  # a long-running process (the page) asks again this long after "unreachable", without a new line

_lock = threading.Lock()
_answers: dict[str, tuple[bool, str, float]] = {}  # endpoint -> (reachable, why not, when asked)


def offline_set() -> bool:
    """``HF_HUB_OFFLINE`` (or huggingface_hub's own reading of it) says offline."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return False
    return bool(constants.HF_HUB_OFFLINE)


def endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _probe(url: str) -> tuple[bool, str]:
    request = urllib.request.Request(url + "/", method="HEAD", headers={"User-Agent": "studio-hub-probe"})
    try:
        with urllib.request.urlopen(request, timeout=probe_timeout()):
            return True, ""
    except urllib.error.HTTPError:  # the server answered (404, 401, ...): it is there
        return True, ""
    except urllib.error.URLError as exc:
        return False, str(getattr(exc, "reason", exc))[:200]
    except (OSError, ValueError) as exc:  # a timeout, a connection reset, a malformed endpoint
        return False, (str(exc) or type(exc).__name__)[:200]


def reachable() -> bool:
    """True when the hub answers (asked once per process and endpoint; after "unreachable", again at most every
    ``REASK_S``); False when offline or nothing answers, in which case one line says so the first time."""
    if offline_set():
        return False
    url = endpoint()
    with _lock:
        known = _answers.get(url)
        if known is None or (not known[0] and time.monotonic() - known[2] > REASK_S):
            ok, why = _probe(url)
            _answers[url] = (ok, why, time.monotonic())
            if not ok and known is None:
                print(f"studio: {unreachable_line()}", file=sys.stderr, flush=True)
        return _answers[url][0]


def answers(url: str) -> tuple[bool, str]:
    """(whether a server answers at ``url``, why not): another hub (ModelScope, engine.data.ms_hub), asked once per
    process and URL like the Hugging Face hub, with no line printed (the caller says it in its own words)."""
    url = url.rstrip("/")
    with _lock:
        known = _answers.get(url)
        if known is None or (not known[0] and time.monotonic() - known[2] > REASK_S):
            ok, why = _probe(url)
            _answers[url] = (ok, why, time.monotonic())
        return _answers[url][0], _answers[url][1]


def reason() -> str:
    """Why the probe got no answer (the client's words), or ''."""
    return _answers.get(endpoint(), (False, "", 0.0))[1]


def unreachable_line() -> Message:
    """The one line said when the hub does not answer."""
    return message("models.hub_down", url=endpoint(), why=reason() or "no answer", timeout=probe_timeout())


def where() -> Message:
    """Which hub this process talks to, in one line: the default one, a mirror (``HF_ENDPOINT``), or none (offline).
    Asks nothing."""
    url = endpoint()
    if offline_set():
        return message("models.hub_where_offline", url=url)
    if url != DEFAULT_ENDPOINT:
        return message("models.hub_where_mirror", url=url)
    return message("models.hub_where", url=url)


def forget() -> None:
    """Ask again next time (a test, or a long-running page after the network came back)."""
    with _lock:
        _answers.clear()
