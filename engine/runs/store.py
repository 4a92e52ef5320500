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
import secrets
import shutil
import sqlite3
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
def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(str(workspace.registry_path()), timeout=30.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    cols = ", ".join(f"{k} {v}" for k, v in _COLUMNS.items())
    conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols})")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_status ON runs(status)")
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
        return conn.execute(sql, args).rowcount == 1


def new_run_id() -> str:
    """Sortable by creation time: 20261130-041500-ab12cd."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def _claim_run_dir(base: Path | None = None) -> tuple[str, Path]:
    """A fresh run id and its folder (in ``base``, default the workspace's runs folder), created atomically: creating
    the folder is what claims the id, so two processes submitting in the same second can never share one (mkdir
    fails for the second; it draws again)."""
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
    d = {k: getattr(rec, k) for k in _COLUMNS}
    d.update(
        gpus=json.dumps(rec.gpus),
        tags=json.dumps(rec.tags),
        share_gpus=int(rec.share_gpus),
        command=json.dumps(rec.command) if rec.command else None,
    )
    try:
        with transaction() as conn:
            conn.execute(f"INSERT INTO runs ({', '.join(d)}) VALUES ({', '.join('?' * len(d))})", list(d.values()))
    except sqlite3.IntegrityError:  # a registry row whose folder was removed by hand: do not reuse its id
        shutil.rmtree(rec.run_dir, ignore_errors=True)
        raise RunsError(run_message("runs.id_taken", id=rec.id)) from None
    return rec.id


# ----------------------------------------------------------------------------------------------- read
def get(run_id: str, *, refresh_status: bool = True) -> RunRecord:
    if refresh_status:
        refresh(run_id)
    conn = _connect()
    try:
        return _fetch(conn, run_id)
    finally:
        conn.close()


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
def derive_final(rec: RunRecord, returncode: int | None, signal_name: str | None) -> tuple[str, str]:
    """(status, reason) of a run whose process tree has ended, from its terminal event and exit code."""
    last = events.last_event(rec.events_path, events.TERMINAL_TYPES) if rec.kind == "train" else None
    stopped_by_user = rec.stop_requested is not None
    if last is not None and last["type"] == "finished":
        return "completed", ""
    if last is not None and last["type"] == "stopped":
        return "stopped", str(last["payload"].get("reason") or "stopped")
    if last is not None and last["type"] == "failed":
        p = last["payload"]
        return "failed", f"{p.get('cause', 'other')}: {p.get('error', '')}".strip()
    if stopped_by_user:
        how = (
            run_message("runs.killed_by", signal=signal_name)
            if signal_name
            else run_message("runs.how_exit", code=returncode)
        )
        return "stopped", run_message("runs.user_stop", how=how)
    if rec.kind == "command" and returncode == 0:
        return "completed", ""
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


def finalize(run_id: str, returncode: int | None, signal_name: str | None, *, log_lines: int = 30) -> RunRecord:
    """Record the end of a run (idempotent: only a running run changes)."""
    rec = get(run_id, refresh_status=False)
    status, reason = derive_final(rec, returncode, signal_name)
    if status == "failed":
        tail = tail_text(rec.log_path, log_lines)
        reason = f"{reason}\n--- last lines of train.log ---\n{tail}" if tail else reason
    update(run_id, only_if_status=("running",), status=status, reason=reason, exit_code=returncode, ended=time.time())
    return get(run_id, refresh_status=False)


def refresh(run_id: str | None = None) -> list[RunRecord]:
    """Bring the status of running runs in line with reality; returns the runs whose status changed."""
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
        ex = read_exit(rec.run_dir)
        if ex is not None:
            changed.append(finalize(rec.id, ex.get("returncode"), ex.get("signal")))
            continue
        if rec.runner_pid is None:
            if rec.started and time.time() - rec.started > CLAIM_TIMEOUT_S:
                # claimed by a scheduler that died before starting it: nothing ran, so queue it again
                update(rec.id, only_if_status=("running",), status="queued", started=None, gpus=[])
                changed.append(get(rec.id, refresh_status=False))
            continue
        if runner_alive(rec) or run_processes(rec.id):
            continue
        # Look once more: the wrapper may have written exit.json between our two reads.
        ex = read_exit(rec.run_dir)
        rc, sig = (ex.get("returncode"), ex.get("signal")) if ex else (None, None)
        changed.append(finalize(rec.id, rc, sig))
    return changed


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
    rec = get(run_id, refresh_status=False)
    skip = {os.getpid(), *(exclude or set())}
    if rec.runner_pid:
        skip.add(rec.runner_pid)
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
