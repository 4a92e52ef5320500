"""The registry's reading API as the current caller may see it: in team mode a member sees only their own runs and
those shared with them read-only (``owned``: what they may act on), and someone else's run id answers as an unknown
one does (``runs.unknown_id``), so nothing tells that it exists.

Light: engine.core.accounts and engine.runs.store. ``engine.runs.registry`` re-exports these ``get``, ``list_runs``,
``run_dir`` and ``log_tail`` instead of the store's, so the page, the CLI and the registry's own operations (stop,
delete, resume, duplicate, rename, tags) all check here; the scheduler, the wrapper and the store's healing read the
store itself and see every run. Whom a call acts for is ``engine.core.accounts.viewer`` (the page's logged-in
member; the operator, who sees everything, at the shell, for an admin and in single-user mode).

A folder or file named by path (the Export tab's source, an evaluation's adapter, a file offered for download) is
checked by ``path_problem``: a member may not reach into a folder of a run they cannot see (its run folder, its output
folder, a job's ``--out`` target), nor into a folder under the workspace's ``runs/`` that is not one of their runs,
nor into another member's upload or imported model (``engine.core.belongings``).
"""

from __future__ import annotations

from pathlib import Path

from engine.core import accounts, belongings, workspace
from engine.core.messages import Message
from engine.runs import run_end, store
from engine.runs.messages import message as run_message
from engine.runs.records import RunRecord, RunsError


def _readable(rec: RunRecord, name: str) -> bool:
    """Whether the account ``name`` may see ``rec``: its own, or shared with it (or with the whole team)."""
    return (rec.owner or accounts.OPERATOR) == name or name in (rec.shared or []) or "*" in (rec.shared or [])


def visible(records: list[RunRecord]) -> list[RunRecord]:
    """The records the current caller may see: their own and those shared with them."""
    who = accounts.viewer()
    return records if who is None else [r for r in records if _readable(r, who.name)]


def get(run_id: str, *, refresh_status: bool = True) -> RunRecord:
    rec = store.get(run_id, refresh_status=refresh_status)
    if not visible([rec]):
        raise RunsError(run_message("runs.unknown_id", id=run_id))
    return rec


def owned(run_id: str, *, refresh_status: bool = False) -> RunRecord:
    """A run the caller may act on (stop, delete, rename, tag, share, move): their own, or any for the operator and
    an admin. A run shared with them is read-only, and says so naming its owner; another's answers as unknown."""
    rec = get(run_id, refresh_status=refresh_status)
    who = accounts.viewer()
    if who is not None and (rec.owner or accounts.OPERATOR) != who.name:
        raise RunsError(run_message("runs.read_only", id=run_id, owner=rec.owner or "the operator"))
    return rec


def list_runs(status: str | tuple[str, ...] | None = None, *, refresh_status: bool = True) -> list[RunRecord]:
    """Every run the caller may see, newest first (optionally only some statuses)."""
    return visible(store.list_runs(status, refresh_status=refresh_status))


def run_dir(run_id: str) -> Path:
    return Path(get(run_id, refresh_status=False).run_dir)


def log_tail(run_id: str, n: int = 50) -> str:
    return run_end.tail_text(get(run_id, refresh_status=False).log_path, n)


def run_folder(run_id: str) -> Path | None:
    """The folder of the run ``run_id`` as the caller may see it: the registry's, else (for the operator only) the
    workspace's ``runs/<id>`` (a folder copied in, or an unreadable registry); None when there is none to show."""
    try:
        return run_dir(run_id)
    except Exception:  # not one of the caller's runs, or an unreadable registry: the layout, for the operator only
        pass
    if accounts.viewer() is not None or not run_id or "/" in run_id or run_id.startswith((".", "~")):
        return None
    return workspace.runs_dir() / run_id


def folders_of(rec: RunRecord) -> list[Path]:
    """The folders a run owns whole: its run folder, its output folder and a job's ``--out`` target (a merge's or an
    export's folder), resolved."""
    found = [rec.run_dir, rec.output_dir]
    argv = rec.command or []
    if rec.kind == "command" and "--out" in argv[:-1]:
        found.append(argv[argv.index("--out") + 1])
    return [Path(f).expanduser().resolve() for f in found if f]


def path_problem(path: str | Path, *, field: str = "") -> Message | None:
    """Why the current caller may not read ``path`` (None: they may): it lies in a folder of a run they cannot see,
    under the workspace's ``runs/`` outside every run of theirs, or in another member's upload or imported model.
    Links are followed first, so a link in a member's own folder that leads into another member's run is refused
    too. Named in one line (``field``: the page's field that gave it)."""
    who = accounts.viewer()
    if who is None or not str(path).strip():
        return None
    p = Path(path).expanduser().resolve()
    mine: list[Path] = []
    for rec in store.list_runs(refresh_status=False):
        folders = folders_of(rec)
        if _readable(rec, who.name):  # their own, or shared with them: read-only (writes are refused elsewhere)
            mine += folders
        elif any(p == f or p.is_relative_to(f) for f in folders):
            return run_message("runs.not_yours", path=path, field=field or "path")
    runs_root = workspace.runs_dir().resolve()
    if p.is_relative_to(runs_root) and not any(p == f or p.is_relative_to(f) for f in mine):
        return run_message("runs.not_yours", path=path, field=field or "path")
    if not belongings.usable_path(p):  # another member's upload or imported model
        return run_message("runs.not_shared", path=path, field=field or "path")
    return None
