"""Team mode on the page: who is asking, the login with the workspace's accounts, and the logout link.

Light: gradio's request context and engine.core.accounts. ``install`` hands the engine the one function that names
the logged-in user of the event being handled (gradio sets ``LocalContext.request`` around every event's function,
timers and loads included), so ``engine.runs.owners`` filters every run the page lists or reads, whichever tab asks.
While the page is built (``building``) nobody is asking: what the page's config carries (the pickers' first choices,
the Runs table's first rows) holds no run in team mode; the page's load reads every list again for the user.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from gradio.context import LocalContext

from engine.core import accounts

NOBODY = "*"  # not an account name (engine.core.accounts.NAME): owns no run, not even the operator's
_BUILDING: contextvars.ContextVar[str | None] = contextvars.ContextVar("studio_page_building", default=None)


def page_user() -> str | None:
    """The logged-in user of the event being handled; None outside one (the page's own threads act for the
    operator)."""
    request = LocalContext.request.get(None)
    name = getattr(request, "username", None) if request is not None else None
    return name or _BUILDING.get()


@contextmanager
def building() -> Iterator[None]:
    token = _BUILDING.set(NOBODY if accounts.team_mode() else None)
    try:
        yield
    finally:
        _BUILDING.reset(token)


def install() -> None:
    accounts.set_viewer_source(page_user)


def login(username: str, password: str) -> bool:
    """gradio's auth callable in team mode; every attempt goes into the audit log (the name tried, never the
    password)."""
    from engine.core import audit

    ok = accounts.verify(username, password)
    audit.record("login" if ok else "login-failed", who=str(username)[:64])
    return ok
