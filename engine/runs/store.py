"""The run registry's store: one SQLite file (``workspace.registry_path()``) in WAL mode with a busy timeout, opened
per operation, so the web UI, the CLI and each run's detached wrapper (``engine.runs.runner``) can read and write it at
the same time; and the status of each run as it really is.

Its parts, each below it: the records and the run folder's notes (``engine.runs.records``), how a run ended
(``engine.runs.run_end``), a run's processes (``engine.runs.processes``) and the registry's healing
(``engine.runs.heal``). The names callers have always read from here are imported here. This module opens the
registry (healing it on the way), reads and writes runs, and keeps their status true.

Light: stdlib (sqlite3), psutil, engine.core.workspace, engine.runs.*; never torch.

Status is never trusted blindly: ``refresh`` derives it from the run folder (``exit.json`` written by the wrapper,
the last terminal event) and from process liveness, so a run whose trainer was SIGKILLed reads ``failed`` with its
log tail as soon as anyone looks. Processes are found by the ``STUDIO_RUN_ID`` marker in their environment (every
process of a run inherits it, even DDP ranks that torch starts in their own sessions). The operations on runs
(submit, stop, delete, ...) are in ``engine.runs.registry``; the queue in ``engine.runs.scheduler``.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from engine.core import accounts, workspace
from engine.runs import outputs
from engine.runs.heal import (
    ensure_registry,
    heal,
    heal_lock,
    heal_missing,
    is_checked,
    is_corrupt,
    sync_folders,
)
from engine.runs.messages import message as run_message
from engine.runs.processes import marked_processes, runner_alive
from engine.runs.records import (
    CLAIM_TIMEOUT_S,
    RunRecord,
    RunsError,
    note,
    open_db,
    row_to_record,
    row_values,
    write_transaction,
)
from engine.runs.run_end import (
    ended_state,
    read_exit,
    tail_text,
    write_problem,
)

# Runs whose state comes from elsewhere than a local process, by kind: kind -> follow(record), True when the run ended
# (engine.runs.registry registers ``engine.runs.slurm.follow`` for "slurm"). ``refresh`` leaves any kind other than
# train / command to its follower, and alone when none is registered: never to the local liveness checks.
FOLLOWERS: dict[str, Callable[[RunRecord], bool]] = {}


# ----------------------------------------------------------------------------------------------- database


def _connect() -> sqlite3.Connection:
    """A connection to a registry checked once per process (``ensure_registry``); a registry found damaged later
    (``database disk image is malformed``) is healed the same way and opened again."""
    if not is_checked():
        ensure_registry()
    elif not workspace.registry_path().exists():  # removed while this process uses it: rebuilt, not recreated empty
        heal_missing()
    try:
        return open_db()
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            heal(exc)
            return open_db()
        if not workspace.registry_path().exists():  # removed between the look above and the open: rebuild it
            heal_missing()
            return open_db()
        if write_problem(exc, workspace.home()) is None:
            raise
        # A full disk: opening in WAL mode must create the -wal and -shm files. Reading still works from the main
        # file (current whenever no connection is open: the WAL is checkpointed into it on the last close); any
        # write on this connection fails with "attempt to write a readonly database".
        conn = sqlite3.connect(f"file:{workspace.registry_path()}?immutable=1", uri=True, isolation_level=None)
        conn.row_factory = sqlite3.Row
        return conn


@contextmanager
def transaction() -> Iterator[sqlite3.Connection]:
    """A write transaction taken up front (BEGIN IMMEDIATE): read-decide-write steps of two processes never
    interleave, so two schedulers cannot both start the same queued run."""
    with write_transaction(_connect()) as conn:
        yield conn


def _fetch(conn: sqlite3.Connection, run_id: str) -> RunRecord:
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise RunsError(run_message("runs.unknown_id", id=run_id))
    return row_to_record(row)


def update(run_id: str, *, only_if_status: tuple[str, ...] | None = None, **values: Any) -> bool:
    """Set columns of one run; with ``only_if_status`` only while the run is in one of those states."""
    for key in ("gpus", "tags", "command", "shared"):
        if key in values and values[key] is not None:
            values[key] = json.dumps(values[key])
    sets = ", ".join(f"{k} = ?" for k in values)
    sql, args = f"UPDATE runs SET {sets} WHERE id = ?", [*values.values(), run_id]
    if only_if_status:
        sql += f" AND status IN ({', '.join('?' * len(only_if_status))})"
        args += list(only_if_status)
    with transaction() as conn:
        changed = conn.execute(sql, args).rowcount == 1
        rdir = conn.execute("SELECT run_dir FROM runs WHERE id = ?", (run_id,)).fetchone() if changed else None
    kept = ("name", "tags", "shared")
    if rdir is not None and any(k in values for k in kept):  # kept in the folder too (see ``note``)
        note(rdir[0], **{k: json.loads(v) if k != "name" else v for k, v in values.items() if k in kept})
    return changed


def new_run_id() -> str:
    """Sortable by creation time: 20261130-041500-ab12cd."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _claim_run_dir(base: Path | None = None) -> tuple[str, Path]:
    """A fresh run id and its folder (in ``base``, default the workspace's runs folder), created atomically: creating
    the folder is what claims the id, so two processes submitting in the same second can never share one (mkdir
    fails for the second; it draws again)."""
    _connect().close()  # the registry exists before the first run folder: a missing one with folders is a lost one
    for _ in range(100):
        run_id = new_run_id()
        rdir = (base or workspace.runs_dir()) / run_id
        try:
            rdir.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            continue
        return run_id, rdir
    raise RunsError(run_message("runs.no_free_id"))


def _insert(rec: RunRecord) -> str:
    rec.owner = rec.owner or accounts.owner_of_new()  # team mode: whoever submits it (engine.core.accounts)
    d = row_values(rec)
    try:
        with heal_lock():  # run.json and the row together: a folder sync (``sync_folders``) sees both or neither
            note(
                rec.run_dir,
                **{k: getattr(rec, k) for k in ("name", "kind", "created", "tags", "command", "gpu_count")},
                share_gpus=rec.share_gpus,
                output_dir=rec.output_dir,
                owner=rec.owner,
            )
            with transaction() as conn:
                cols, marks = ", ".join(d), ", ".join("?" * len(d))
                conn.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", list(d.values()))
    except sqlite3.IntegrityError:  # a registry row whose folder was removed by hand: do not reuse its id
        shutil.rmtree(rec.run_dir, ignore_errors=True)
        raise RunsError(run_message("runs.id_taken", id=rec.id)) from None
    return rec.id


# ----------------------------------------------------------------------------------------------- read
def get(run_id: str, *, refresh_status: bool = True) -> RunRecord:
    if refresh_status:
        refresh(run_id)
    for attempt in (0, 1):
        conn = _connect()
        try:
            return _fetch(conn, run_id)
        except RunsError:
            if attempt or not sync_folders():  # a run folder the registry lost (a wrapper reporting its end)
                raise
        finally:
            conn.close()
    raise AssertionError("unreachable")


def list_runs(status: str | tuple[str, ...] | None = None, *, refresh_status: bool = True) -> list[RunRecord]:
    """Every run, newest first (optionally only some statuses)."""
    if refresh_status:
        refresh()
    conn = _connect()
    try:
        if status is None:
            rows = conn.execute("SELECT * FROM runs ORDER BY created DESC, id DESC").fetchall()
        else:
            wanted = (status,) if isinstance(status, str) else tuple(status)
            rows = conn.execute(
                f"SELECT * FROM runs WHERE status IN ({', '.join('?' * len(wanted))}) ORDER BY created DESC, id DESC",
                wanted,
            ).fetchall()
    finally:
        conn.close()
    return [row_to_record(r) for r in rows]


def run_dir(run_id: str) -> Path:
    return Path(get(run_id, refresh_status=False).run_dir)


def log_tail(run_id: str, n: int = 50) -> str:
    return tail_text(get(run_id, refresh_status=False).log_path, n)


# ----------------------------------------------------------------------------------------------- status


def finalize(
    run_id: str,
    returncode: int | None,
    signal_name: str | None,
    *,
    log_lines: int = 30,
    problem: str | None = None,
    ended: float | None = None,
) -> RunRecord:
    """Record the end of a run (idempotent: only a running run changes)."""
    rec = get(run_id, refresh_status=False)
    status, reason = ended_state(rec, returncode, signal_name, problem, log_lines)
    if rec.status == "running":
        outputs.seal(rec.run_dir)  # what the run wrote, listed before its end is seen
    update(
        run_id,
        only_if_status=("running",),
        status=status,
        reason=reason,
        exit_code=returncode,
        ended=ended or time.time(),
    )
    return get(run_id, refresh_status=False)


def refresh(run_id: str | None = None) -> list[RunRecord]:
    """Bring the status of running runs in line with reality (and the registry with the run folders: ``sync_folders``);
    returns the runs whose status changed."""
    if run_id is None:
        sync_folders()
    conn = _connect()
    try:
        if run_id is None:
            rows = conn.execute("SELECT * FROM runs WHERE status = 'running'").fetchall()
        else:
            rows = conn.execute("SELECT * FROM runs WHERE id = ? AND status = 'running'", (run_id,)).fetchall()
    finally:
        conn.close()
    changed = []
    for rec in map(row_to_record, rows):
        if rec.kind not in ("train", "command"):  # e.g. a Slurm job: FOLLOWERS above
            follow = FOLLOWERS.get(rec.kind)
            if follow is not None and follow(rec):
                changed.append(get(rec.id, refresh_status=False))
            continue
        try:
            found = _refresh_one(rec)
        except sqlite3.OperationalError:  # the registry cannot be written now (a full disk): the next look will
            continue
        if found is not None:
            changed.append(found)
    return changed


def _refresh_one(rec: RunRecord) -> RunRecord | None:
    ex = read_exit(rec.run_dir)
    if ex is not None:
        return finalize(rec.id, ex.get("returncode"), ex.get("signal"), problem=ex.get("problem"))
    if rec.runner_pid is None:
        if rec.started and time.time() - rec.started > CLAIM_TIMEOUT_S:
            # claimed by a scheduler that died before starting it: nothing ran, so queue it again
            update(rec.id, only_if_status=("running",), status="queued", started=None, gpus=[])
            return get(rec.id, refresh_status=False)
        return None
    if runner_alive(rec) or run_processes(rec.id):
        return None
    # Look once more: the wrapper may have written exit.json between our two reads.
    ex = read_exit(rec.run_dir) or {}
    return finalize(rec.id, ex.get("returncode"), ex.get("signal"), problem=ex.get("problem"))


# ----------------------------------------------------------------------------------------------- processes


def run_processes(run_id: str, exclude: set[int] | None = None) -> list[psutil.Process]:
    """Live (non-zombie) processes carrying the run's marker, except this process, the wrapper and ``exclude``."""
    try:
        runner_pid = get(run_id, refresh_status=False).runner_pid
    except (RunsError, sqlite3.Error):  # an unreadable registry (a full disk): the caller excludes its own pid
        runner_pid = None
    return marked_processes(run_id, {*(exclude or set()), *([runner_pid] if runner_pid else [])})


# ----------------------------------------------------------------------------------------------- run folder notes


# ----------------------------------------------------------------------------------------------- disk full


# ----------------------------------------------------------------------------------------------- healing
