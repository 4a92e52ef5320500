"""The run registry's records: the ``runs`` table of the SQLite file (``workspace.registry_path()``, WAL mode, a busy
timeout, opened per operation), a run's record as Python reads it, the write transaction, and the run folder's own
notes (``run.json``: what a lost registry is rebuilt from). No healing and no status here: ``engine.runs.store`` opens
the registry through ``engine.runs.heal`` and keeps each run's status true.

Light: stdlib (sqlite3), yaml, engine.core.workspace, engine.spec.schema; never torch.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.core import workspace
from engine.spec.schema import RunSpec, parse_spec

STATUSES = ("queued", "running", "completed", "failed", "stopped")


ACTIVE = ("queued", "running")


# A run claimed by schedule() whose wrapper never reported back within this many seconds goes back to the queue.
CLAIM_TIMEOUT_S = 30.0


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
    "owner": "TEXT NOT NULL DEFAULT ''",  # team mode: the account that submitted it; '' the operator's
    "moved": "REAL",  # when the operator or an admin moved the queued run to the front of the queue
    "shared": "TEXT NOT NULL DEFAULT '[]'",  # team mode: accounts that may see it read-only ("*": every account)
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
    owner: str = ""  # engine.core.accounts: '' is the operator (the shell, and every run from before team mode)
    moved: float | None = None  # moved to the front of the queue (engine.runs.fair.order), when
    shared: list[str] = field(default_factory=list)  # accounts it is shared with read-only; "*": the whole team

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def training(self) -> bool:
        """A training run (a spec run, here or on Slurm), not a command job (merge, export, evaluation, serve,
        download, push, import): what the page's pickers of training runs list."""
        return self.kind != "command"

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


def open_db(*, create: bool = False) -> sqlite3.Connection:
    """A connection to the registry. Only the healer creates the file (``create``, under the heal lock, after the
    stale -wal / -shm of a removed registry are gone): anyone else opening a registry that was just removed gets
    "unable to open database file" instead of a new empty file, which would replay the removed file's -wal (a broken
    schema: "no such table: runs") and lose every run; ``engine.runs.store._connect`` then asks for the heal."""
    mode = "rwc" if create else "rw"
    uri = f"{workspace.registry_path().resolve().as_uri()}?mode={mode}"
    conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: a committed write (a run's end, its pids) survives a power loss too, not only a crash of the process.
    conn.execute("PRAGMA synchronous=FULL")
    cols = ", ".join(f"{k} {v}" for k, v in _COLUMNS.items())
    conn.execute(f"CREATE TABLE IF NOT EXISTS runs ({cols})")
    have = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    for name in _COLUMNS.keys() - have:  # a registry from before a column was added: the column, with its default
        try:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {_COLUMNS[name]}")
        except sqlite3.OperationalError as exc:  # another process added it meanwhile
            if "duplicate column" not in str(exc):
                raise
    conn.execute("CREATE INDEX IF NOT EXISTS runs_status ON runs(status)")
    return conn


def row_to_record(row: sqlite3.Row) -> RunRecord:
    d = dict(row)
    d["gpus"] = json.loads(d["gpus"] or "[]")
    d["tags"] = json.loads(d["tags"] or "[]")
    d["command"] = json.loads(d["command"]) if d["command"] else None
    d["shared"] = json.loads(d.get("shared") or "[]")
    d["share_gpus"] = bool(d["share_gpus"])
    return RunRecord(**d)


def row_values(rec: RunRecord) -> dict[str, Any]:
    d = {k: getattr(rec, k) for k in _COLUMNS}
    d.update(
        gpus=json.dumps(rec.gpus),
        tags=json.dumps(rec.tags),
        shared=json.dumps(rec.shared),
        share_gpus=int(rec.share_gpus),
        command=json.dumps(rec.command) if rec.command else None,
    )
    return d


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


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction on ``conn`` taken up front (BEGIN IMMEDIATE), committed or rolled back, then closed:
    read-decide-write steps of two processes never interleave, so two schedulers cannot both start one queued run."""
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
