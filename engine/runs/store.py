"""The run registry's store: one SQLite file (``workspace.registry_path()``) in WAL mode with a busy timeout, opened
per operation, so the web UI, the CLI and each run's detached wrapper (``engine.runs.runner``) can read and write it at
the same time; and the status of each run as it really is.

Light: stdlib (sqlite3), psutil, engine.spec.schema / events / workspace; never torch.

Status is never trusted blindly: ``refresh`` derives it from the run folder (``exit.json`` written by the wrapper,
the last terminal event) and from process liveness, so a run whose trainer was SIGKILLed reads ``failed`` with its
log tail as soon as anyone looks. Processes are found by the ``STUDIO_RUN_ID`` marker in their environment (every
process of a run inherits it, even DDP ranks that torch starts in their own sessions). The operations on runs
(submit, stop, delete, ...) are in ``engine.runs.registry``; the queue in ``engine.runs.scheduler``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from engine.core import events, workspace
from engine.runs.messages import message as run_message
from engine.spec.schema import RunSpec, parse_spec

MARKER = "STUDIO_RUN_ID"

STATUSES = ("queued", "running", "completed", "failed", "stopped")
ACTIVE = ("queued", "running")
# A run claimed by schedule() whose wrapper never reported back within this many seconds goes back to the queue.
CLAIM_TIMEOUT_S = 30.0
# Runs whose state comes from elsewhere than a local process, by kind: kind -> follow(record), True when the run ended
# (``engine.runs.slurm`` registers "slurm"; engine.runs.registry imports it). ``refresh`` leaves any kind other than
# train / command to its follower, and alone when none is registered: never to the local liveness checks.
FOLLOWERS: dict[str, Callable[[RunRecord], bool]] = {}

_COLUMNS = {
    "id": "TEXT PRIMARY KEY",
    "name": "TEXT NOT NULL",
    "kind": "TEXT NOT NULL DEFAULT 'train'",
    "spec": "TEXT NOT NULL DEFAULT ''",
    "command": "TEXT",
    "status": "TEXT NOT NULL",
    "created": "REAL NOT NULL",
    "started": "REAL",
    "ended": "REAL",
    "pid": "INTEGER",
    "pgid": "INTEGER",
    "runner_pid": "INTEGER",
    "exit_code": "INTEGER",
    "gpus": "TEXT NOT NULL DEFAULT '[]'",
    "share_gpus": "INTEGER NOT NULL DEFAULT 0",
    "gpu_count": "INTEGER NOT NULL DEFAULT 0",
    "run_dir": "TEXT NOT NULL",
    "output_dir": "TEXT NOT NULL",
    "tags": "TEXT NOT NULL DEFAULT '[]'",
    "reason": "TEXT NOT NULL DEFAULT ''",
    "stop_requested": "REAL",
}


class RunsError(Exception):
    """An operation on a run that cannot be done (unknown id, deleting a running run, ...)."""


@dataclass
class RunRecord:
    id: str
    name: str
    status: str
    created: float
    run_dir: str
    output_dir: str
    kind: str = "train"  # "train": a spec run; "command": any argv run under the same supervision
    spec: str = ""  # the spec as YAML text
    command: list[str] | None = None
    started: float | None = None
    ended: float | None = None
    pid: int | None = None  # the trainer's launcher process (leader of its process group)
    pgid: int | None = None
    runner_pid: int | None = None  # the detached wrapper (engine.runs.runner)
    exit_code: int | None = None
    gpus: list[int] = field(default_factory=list)
    share_gpus: bool = False
    gpu_count: int = 0  # command runs: GPUs wanted (train runs take theirs from the spec)
    tags: list[str] = field(default_factory=list)
    reason: str = ""  # why it failed (or how it was stopped)
    stop_requested: float | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def events_path(self) -> Path:
        return Path(self.run_dir) / "events.jsonl"

    @property
    def metrics_path(self) -> Path:
        return Path(self.run_dir) / "metrics.jsonl"

    @property
    def log_path(self) -> Path:
        return Path(self.run_dir) / "train.log"

    def load_spec(self) -> RunSpec:
        return parse_spec(yaml.safe_load(self.spec), source=f"run {self.id}")


# ----------------------------------------------------------------------------------------------- database
def _open() -> sqlite3.Connection:
    conn = sqlite3.connect(str(workspace.registry_path()), timeout=30.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a committed write (a run's end, its pids) survives a power loss too, not only a crash of the process.
    conn.execute("PRAGMA synchronous=FULL")
    cols = ", ".join(f"{k} {v}" for k, v in _COLUMNS.items())
    conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols})")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_status ON runs(status)")
    return conn


def _connect() -> sqlite3.Connection:
    """A connection to a registry checked once per process (``ensure_registry``); a registry found damaged later
    (``database disk image is malformed``) is healed the same way and opened again."""
    if str(workspace.registry_path()) not in _CHECKED:
        ensure_registry()
    elif not workspace.registry_path().exists():  # removed while this process uses it: rebuilt, not recreated empty
        heal_missing()
    try:
        return _open()
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            heal(exc)
            return _open()
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
    conn = _connect()
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.close()


def _row_to_record(row: sqlite3.Row) -> RunRecord:
    d = dict(row)
    d["gpus"] = json.loads(d["gpus"] or "[]")
    d["tags"] = json.loads(d["tags"] or "[]")
    d["command"] = json.loads(d["command"]) if d["command"] else None
    d["share_gpus"] = bool(d["share_gpus"])
    return RunRecord(**d)


def _fetch(conn: sqlite3.Connection, run_id: str) -> RunRecord:
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise RunsError(run_message("runs.unknown_id", id=run_id))
    return _row_to_record(row)


def update(run_id: str, *, only_if_status: tuple[str, ...] | None = None, **values: Any) -> bool:
    """Set columns of one run; with ``only_if_status`` only while the run is in one of those states."""
    for key in ("gpus", "tags", "command"):
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
    if rdir is not None and ("name" in values or "tags" in values):  # kept in the folder too (see ``note``)
        note(rdir[0], **{k: json.loads(v) if k == "tags" else v for k, v in values.items() if k in ("name", "tags")})
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


def _row_values(rec: RunRecord) -> dict[str, Any]:
    d = {k: getattr(rec, k) for k in _COLUMNS}
    d.update(
        gpus=json.dumps(rec.gpus),
        tags=json.dumps(rec.tags),
        share_gpus=int(rec.share_gpus),
        command=json.dumps(rec.command) if rec.command else None,
    )
    return d


def _insert(rec: RunRecord) -> str:
    d = _row_values(rec)
    try:
        with _heal_lock():  # run.json and the row together: a folder sync (``sync_folders``) sees both or neither
            note(
                rec.run_dir,
                **{k: getattr(rec, k) for k in ("name", "kind", "created", "tags", "command", "gpu_count")},
                share_gpus=rec.share_gpus,
                output_dir=rec.output_dir,
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
    return [_row_to_record(r) for r in rows]


def run_dir(run_id: str) -> Path:
    return Path(get(run_id, refresh_status=False).run_dir)


def log_tail(run_id: str, n: int = 50) -> str:
    return tail_text(get(run_id, refresh_status=False).log_path, n)


def tail_text(path: Path, n: int = 50, max_bytes: int = 256 * 1024) -> str:
    """The last ``n`` lines of a text file, reading at most ``max_bytes`` from its end."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except FileNotFoundError:
        return ""
    # tqdm progress bars rewrite one line with \r: keep only the last state of each line
    lines = [ln.rsplit("\r", 1)[-1] for ln in data.decode("utf-8", "replace").splitlines()]
    return "\n".join(lines[-n:]) if n > 0 else ""


# ----------------------------------------------------------------------------------------------- status
def derive_final(
    rec: RunRecord, returncode: int | None, signal_name: str | None, problem: str | None = None
) -> tuple[str, str]:
    """(status, reason) of a run whose process tree has ended, from its terminal event and exit code. ``problem``:
    what the wrapper could not write (exit.json's ``problem``: a full disk), the cause when no event says more."""
    last = events.last_event(rec.events_path, events.TERMINAL_TYPES) if rec.kind == "train" else None
    stopped_by_user = rec.stop_requested is not None
    if last is not None and last["type"] == "finished":
        return "completed", ""
    if last is not None and last["type"] == "stopped":
        return "stopped", str(last["payload"].get("reason") or "stopped")
    if last is not None and last["type"] == "failed":
        p = last["payload"]
        error = str(p.get("error", ""))
        if p.get("cause") == "disk" and "disk full" not in error and _NO_SPACE.search(error):
            # the trainer's own words ("SafetensorError: ... os error 28") under the cause the user acts on
            error = f"{run_message('runs.disk_full', path=rec.output_dir)} ({error})"
        return "failed", f"{p.get('cause', 'other')}: {error}".strip()
    if rec.kind == "command" and returncode == 0:  # done, even if a stop came too late to change it (a merge that
        return "completed", ""  # had published its model ignores SIGTERM and exits 0)
    if stopped_by_user:
        how = (
            run_message("runs.killed_by", signal=signal_name)
            if signal_name
            else run_message("runs.how_exit", code=returncode)
        )
        return "stopped", run_message("runs.user_stop", how=how)
    if problem:
        if rec.kind == "command" and returncode and signal_name is None:  # its own failure, then what was not written
            return "failed", f"{run_message('runs.command_exit', code=returncode)}; {problem}"
        return "failed", problem
    if returncode is None and signal_name is None:
        free = disk_free(rec.run_dir)  # no exit record at all: a full disk is why more often than a kill
        if free is not None and free < LOW_SPACE_BYTES:
            return "failed", run_message("runs.disk_full", path=rec.run_dir)
    if signal_name:
        return "failed", run_message("runs.killed_by_signal", signal=signal_name)
    if returncode is None:
        return "failed", run_message("runs.no_exit_record")
    if returncode == 0:
        return "failed", run_message("runs.exit0_unfinished")
    return "failed", run_message(
        "runs.command_exit" if rec.kind == "command" else "runs.trainer_exit", code=returncode
    )


def read_exit(rdir: str | Path) -> dict | None:
    try:
        return json.loads((Path(rdir) / "exit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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
    status, reason = derive_final(rec, returncode, signal_name, problem)
    if status == "failed":
        tail = tail_text(rec.log_path, log_lines)
        reason = f"{reason}\n--- last lines of train.log ---\n{tail}" if tail else reason
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
    for rec in map(_row_to_record, rows):
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
def _is_run_process(proc: psutil.Process, run_id: str) -> bool:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return proc.environ().get(MARKER) == run_id
    except (psutil.Error, OSError):
        return False


def run_processes(run_id: str, exclude: set[int] | None = None) -> list[psutil.Process]:
    """Live (non-zombie) processes carrying the run's marker, except the wrapper and ``exclude``."""
    try:
        runner_pid = get(run_id, refresh_status=False).runner_pid
    except (RunsError, sqlite3.Error):  # an unreadable registry (a full disk): the caller excludes its own pid
        runner_pid = None
    skip = {os.getpid(), *(exclude or set())}
    if runner_pid:
        skip.add(runner_pid)
    found = []
    for proc in psutil.process_iter():
        if proc.pid not in skip and _is_run_process(proc, run_id):
            found.append(proc)
    return found


def runner_alive(rec: RunRecord) -> bool:
    if not rec.runner_pid:
        return False
    try:
        return _is_run_process(psutil.Process(rec.runner_pid), rec.id)
    except psutil.Error:
        return False


def signal_all(procs: list[psutil.Process], sig: int, pgid: int | None = None) -> None:
    """Signal the run's (marked) processes, and its process group while one of them is still in it: a group id
    left behind by ended processes may belong to someone else by now."""
    if pgid and any(_pgid_of(p) == pgid for p in procs):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def _pgid_of(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except OSError:
        return None


# ----------------------------------------------------------------------------------------------- run folder notes
# What the registry knows of a run and its folder does not tell (name, tags, a command's argv, a queued run taken off
# the queue) is also kept in the folder's ``run.json``, so a lost registry can be rebuilt from the folders.
RUN_NOTES = "run.json"


def note(rdir: str | Path, **values: Any) -> None:
    """Merge ``values`` into the run folder's ``run.json`` (best effort: the registry row stays the record)."""
    path = Path(rdir) / RUN_NOTES
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        data.update(values)
        tmp = path.with_name(RUN_NOTES + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
    except (OSError, ValueError):
        pass


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ----------------------------------------------------------------------------------------------- disk full
_NO_SPACE = re.compile(r"no space left on device|errno 28|os error 28|disk quota exceeded", re.IGNORECASE)
# Free space under this many bytes counts as a full disk when a write failed without saying why (SQLite's
# "disk I/O error") or when a run ended without any record.
LOW_SPACE_BYTES = 1 << 20


def disk_free(path: str | Path) -> int | None:
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def write_problem(exc: BaseException, path: str | Path):
    """The named cause of a failed write under ``path`` (a Message), or None when ``exc`` is no disk problem:
    ``disk full: no space left on device under <path>`` for ENOSPC / EDQUOT / SQLite's full disk, and for an
    I/O error on a disk with (almost) no space left; ``I/O error writing under <path>: ...`` otherwise."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return run_message("runs.disk_full", path=str(path))
    text = str(exc).lower()
    io_error = (isinstance(exc, OSError) and exc.errno == errno.EIO) or (
        isinstance(exc, sqlite3.OperationalError) and ("disk i/o error" in text or "disk is full" in text)
    )
    if not io_error:
        return None
    free = disk_free(path)
    if "disk is full" in text or (free is not None and free < LOW_SPACE_BYTES):
        return run_message("runs.disk_full", path=str(path))
    return run_message("runs.io_error", path=str(path), error=str(exc))


# ----------------------------------------------------------------------------------------------- healing
_CHECKED: set[str] = set()  # registry paths this process has checked
NOTICE_FILE = "registry-notice.json"


def is_corrupt(exc: BaseException) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB: the file is damaged (not: locked, read-only, disk full - OperationalError)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


_HELD = threading.local()  # how deep this thread is in _heal_lock (it is re-entrant within a thread)


@contextmanager
def _heal_lock() -> Iterator[None]:
    import fcntl

    if getattr(_HELD, "depth", 0):
        _HELD.depth += 1
        try:
            yield
        finally:
            _HELD.depth -= 1
        return
    with open(workspace.home() / "registry.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _HELD.depth = 1
        try:
            yield
        finally:
            _HELD.depth = 0
            fcntl.flock(fh, fcntl.LOCK_UN)


def _damage(path: Path) -> str | None:
    """What is wrong with the registry file, or None when it reads back whole."""
    try:
        conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            rows = conn.execute("PRAGMA quick_check").fetchall()
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return str(exc) if is_corrupt(exc) else None
    if rows and rows[0][0] != "ok":
        return "; ".join(str(r[0]) for r in rows[:3])[:300]
    return None


def ensure_registry():
    """Check the registry once per process, before its first use: a damaged ``registry.db`` is kept aside
    (``registry.db.corrupt-<time>``, with its -wal and -shm) and rebuilt from the run folders; a missing one is
    rebuilt when run folders exist. Returns the notice (a Message) when it healed something, else None. Safe from
    several processes at once (a lock file; the second finds the registry healed)."""
    path = workspace.registry_path()
    key = str(path)
    with _heal_lock():
        if key in _CHECKED:
            return None
        _CHECKED.add(key)
        if path.exists() and path.stat().st_size > 0:
            problem = _damage(path)
            if problem is None:
                sync_folders()  # a valid file may still have lost runs (recreated empty by a process of old)
                return None
            return _rebuild(problem)
        folders = _run_folders()
        if not folders:
            _open().close()
            return None
        return _rebuild(None)


def heal_missing():
    """The registry file was removed while this process uses it (by hand, by a cleanup): rebuild it from the run
    folders (once, whoever sees it first), never start over with an empty one. Stale -wal / -shm files of the removed
    file are removed with it, so they cannot be replayed into the new one."""
    path = workspace.registry_path()
    with _heal_lock():
        if path.exists():
            return None  # another process rebuilt it meanwhile
        for suffix in ("-wal", "-shm"):
            path.with_name(path.name + suffix).unlink(missing_ok=True)
        return _rebuild(None)


def sync_folders() -> int:
    """Add back the runs whose folder the registry does not know (a registry recreated empty, a row lost): each run
    folder is read back as a rebuild would (``_rebuild_run``). Called by every ``refresh`` of all runs (the watchdog,
    the CLI, the scheduler in each wrapper) and when an id is unknown. Returns how many runs were added back."""
    try:
        candidates = {p.name: p for p in _run_folders()}
    except OSError:
        return 0
    if not candidates:
        return 0
    conn = _connect()
    try:
        known = {r[0] for r in conn.execute("SELECT id FROM runs").fetchall()}
    finally:
        conn.close()
    if not set(candidates) - known:
        return 0
    count = 0
    with _heal_lock():  # a submit writes run.json and its row under the same lock
        conn = _connect()
        try:
            known = {r[0] for r in conn.execute("SELECT id FROM runs").fetchall()}
        finally:
            conn.close()
        for run_id in sorted(set(candidates) - known):
            rdir = candidates[run_id]
            if not _settled(rdir):
                continue
            try:
                count += _rebuild_run(rdir)
            except Exception as exc:  # noqa: BLE001 - one unreadable folder must not cost the others
                print(f"studio: run folder {rdir} could not be read back: {exc}", file=sys.stderr, flush=True)
        if count:
            _notify(run_message("runs.registry_resynced", count=count))
    return count


def _settled(rdir: Path) -> bool:
    """A folder a submit has finished with: its run.json is written with its row (under the lock), or it is older
    than a submit takes (a folder of a version before run.json, or of a submit that died half-way)."""
    if (rdir / RUN_NOTES).is_file():
        return True
    try:
        return time.time() - rdir.stat().st_mtime > CLAIM_TIMEOUT_S
    except OSError:
        return False


def heal(exc: BaseException):
    """A registry found damaged while in use: keep it aside and rebuild it (once, whoever sees it first)."""
    path = workspace.registry_path()
    with _heal_lock():
        problem = _damage(path) if path.exists() else None
        if problem is None and path.exists():
            return None  # another process healed it meanwhile
        _CHECKED.add(str(path))
        return _rebuild(problem or str(exc))


def _rebuild(problem: str | None):
    """Called under the lock: set the damaged file aside (``problem``; None: it was missing), rebuild, notify."""
    path = workspace.registry_path()
    aside = None
    if problem is not None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        path.replace(aside)
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                side.replace(aside.with_name(aside.name + suffix))
    _open().close()
    count = 0
    for rdir in _run_folders():
        try:
            count += _rebuild_run(rdir)
        except Exception as exc:  # noqa: BLE001 - one unreadable folder must not cost the others
            print(f"studio: run folder {rdir} could not be read back: {exc}", file=sys.stderr, flush=True)
    if problem is None:
        notice = run_message("runs.registry_rebuilt_missing", count=count)
    else:
        notice = run_message("runs.registry_rebuilt_corrupt", error=problem, aside=str(aside), count=count)
    return _notify(notice)


def _notify(notice):
    """Say on stderr and for the page (``registry_notice``) what the registry's healing did."""
    from engine.core.messages import to_json

    print(f"studio: {notice}", file=sys.stderr, flush=True)
    tmp = workspace.home() / (NOTICE_FILE + ".tmp")
    try:
        tmp.write_text(json.dumps({"ts": time.time(), "text": str(notice), "msg": to_json(notice)}), encoding="utf-8")
        tmp.replace(workspace.home() / NOTICE_FILE)
    except OSError:
        tmp.unlink(missing_ok=True)
    return notice


def registry_notice() -> tuple[float, Any] | None:
    """(when, Message) of the last time the registry was rebuilt, for the page; None when it never was."""
    from engine.core.messages import from_json

    data = _read_json(workspace.home() / NOTICE_FILE)
    if not data:
        return None
    try:
        return float(data.get("ts") or 0), (from_json(data["msg"]) if data.get("msg") else data.get("text", ""))
    except Exception:  # noqa: BLE001 - a notice written by another version: its English text
        return float(data.get("ts") or 0), str(data.get("text", ""))


def _run_folders() -> list[Path]:
    root = workspace.runs_dir()
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and any((p / f).is_file() for f in ("spec.yaml", "launch.json", RUN_NOTES))
    )


def _time_of_id(run_id: str) -> float | None:
    try:
        return time.mktime(time.strptime(run_id[:15], "%Y%m%d-%H%M%S"))
    except ValueError:
        return None


def _rebuild_run(rdir: Path) -> int:
    """One registry row from a run folder: run.json (name, tags, command), spec.yaml, launch.json (argv, GPUs),
    runner.json (pids, start), exit.json and events.jsonl (how it ended), then the status as ``refresh`` would
    derive it; a run still alive stays running. Returns 1 when a row was added."""
    notes = _read_json(rdir / RUN_NOTES) or {}
    if notes.get("forgotten"):  # deleted with --keep-files: its folder stays, the run is not listed again
        return 0
    launched = _read_json(rdir / "launch.json")
    runner = _read_json(rdir / "runner.json") or {}
    spec_text = (rdir / "spec.yaml").read_text(encoding="utf-8") if (rdir / "spec.yaml").is_file() else ""
    kind = notes.get("kind") or ("train" if spec_text else "command")
    command = notes.get("command") or ((launched or {}).get("argv") if kind == "command" else None)
    if kind == "command" and not command:
        return 0
    spec = {}
    if spec_text:
        try:
            spec = yaml.safe_load(spec_text) or {}
        except yaml.YAMLError:
            spec = {}
    method, model, output = (spec.get(k) or {} for k in ("method", "model", "output"))
    if kind == "train":
        default = f"{method.get('stage')}-{method.get('finetuning')}-{Path(str(model.get('name_or_path'))).name}"
        name = notes.get("name") or output.get("run_name") or default
        output_dir = notes.get("output_dir") or output.get("output_dir") or str(rdir)
    else:
        name = notes.get("name") or Path(command[0]).name
        output_dir = notes.get("output_dir") or str(rdir)
    tags = notes.get("tags")
    if tags is None:  # a folder from before run.json: a merge still says what it is by its argv
        tags = ["merge"] if kind == "command" and command[1:3] == ["-m", "engine.trainer.merge"] else []
    rec = RunRecord(
        id=rdir.name,
        name=str(name),
        status="queued",
        created=float(notes.get("created") or _time_of_id(rdir.name) or rdir.stat().st_mtime),
        run_dir=str(rdir),
        output_dir=str(output_dir),
        kind=kind,
        spec=spec_text,
        command=list(command) if command else None,
        gpu_count=int(notes.get("gpu_count") or 0),
        share_gpus=bool(notes.get("share_gpus") or (spec.get("launch") or {}).get("share_gpus")),
        tags=list(tags),
        stop_requested=notes.get("stop_requested"),
    )
    final = notes.get("final") if isinstance(notes.get("final"), dict) else None
    ex = read_exit(rdir)
    if final and ex is None:  # ended without a wrapper: taken off the queue, could never start, failed to launch
        rec.status, rec.reason, rec.ended = final.get("status", "failed"), final.get("reason", ""), final.get("ended")
    elif launched is not None:
        rec.status = "running"
        rec.gpus = list(launched.get("gpus") or [])
        rec.started = runner.get("started") or (rdir / "launch.json").stat().st_mtime
        rec.pid, rec.pgid = runner.get("pid"), runner.get("pgid")
        rec.runner_pid = runner.get("runner_pid") or 0  # 0, not None: None means "claimed, never launched"
    d = _row_values(rec)
    with transaction() as conn:
        added = conn.execute(
            f"INSERT OR IGNORE INTO runs ({', '.join(d)}) VALUES ({', '.join('?' * len(d))})", list(d.values())
        ).rowcount
    if added and rec.status == "running":
        if ex is not None:
            finalize(rec.id, ex.get("returncode"), ex.get("signal"), problem=ex.get("problem"), ended=ex.get("ts"))
        elif not (runner_alive(rec) or run_processes(rec.id)):
            finalize(rec.id, None, None)
    return int(bool(added))
