"""The registry's reading API as the current caller may see it: in team mode a member sees only their own runs, and
someone else's run id answers as an unknown one does (``runs.unknown_id``), so nothing tells that it exists.

Light: engine.core.accounts and engine.runs.store. ``engine.runs.registry`` re-exports these ``get``, ``list_runs``,
``run_dir`` and ``log_tail`` instead of the store's, so the page, the CLI and the registry's own operations (stop,
delete, resume, duplicate, rename, tags) all check here; the scheduler, the wrapper and the store's healing read the
store itself and see every run. Whom a call acts for is ``engine.core.accounts.viewer`` (the page's logged-in
member; the operator, who sees everything, at the shell, for an admin and in single-user mode).
"""

from __future__ import annotations

from pathlib import Path

from engine.core import accounts
from engine.runs import store
from engine.runs.messages import message as run_message
from engine.runs.store import RunRecord, RunsError


def visible(records: list[RunRecord]) -> list[RunRecord]:
    """The records the current caller may see."""
    who = accounts.viewer()
    return records if who is None else [r for r in records if (r.owner or accounts.OPERATOR) == who.name]


def get(run_id: str, *, refresh_status: bool = True) -> RunRecord:
    rec = store.get(run_id, refresh_status=refresh_status)
    if not visible([rec]):
        raise RunsError(run_message("runs.unknown_id", id=run_id))
    return rec


def list_runs(status: str | tuple[str, ...] | None = None, *, refresh_status: bool = True) -> list[RunRecord]:
    """Every run the caller may see, newest first (optionally only some statuses)."""
    return visible(store.list_runs(status, refresh_status=refresh_status))


def run_dir(run_id: str) -> Path:
    return Path(get(run_id, refresh_status=False).run_dir)


def log_tail(run_id: str, n: int = 50) -> str:
    return store.tail_text(get(run_id, refresh_status=False).log_path, n)
