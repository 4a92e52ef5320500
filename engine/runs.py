"""The run registry: every run ever submitted, its status, and the operations on it (submit, stop, delete, ...).

Light: stdlib (sqlite3), engine.spec / events / workspace; never torch. The registry is one SQLite file
(``workspace.registry_path()``) in WAL mode with a busy timeout, opened per operation, so the web UI, the CLI and
each run's detached wrapper (``engine.runner``) can read and write it at the same time.

Status is never trusted blindly: ``refresh`` derives it from the run folder (``exit.json`` written by the wrapper,
the last terminal event) and from process liveness, so a run whose trainer was SIGKILLed reads ``failed`` with its
log tail as soon as anyone looks. Processes are found by the ``STUDIO_RUN_ID`` marker in their environment (every
process of a run inherits it, even DDP ranks that torch starts in their own sessions). Scheduling and process
control live in ``engine.scheduler``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine import events, workspace
from engine.run_messages import message as run_message
from engine.spec import RunSpec, SpecError, dump_spec, parse_spec, save_spec, spec_to_dict, validate_spec
from engine.spec_messages import message

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
    runner_pid: int | None = None  # the detached wrapper (engine.runner)
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


def _claim_run_dir() -> tuple[str, Path]:
    """A fresh run id and its folder, created atomically: creating the folder is what claims the id, so two
    processes submitting in the same second can never share one (mkdir fails for the second; it draws again)."""
    for _ in range(100):
        run_id = new_run_id()
        rdir = workspace.runs_dir() / run_id
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


# ----------------------------------------------------------------------------------------------- submit
def _as_spec_data(spec: RunSpec | dict | str | Path) -> Any:
    if isinstance(spec, RunSpec):
        return spec_to_dict(spec)
    if isinstance(spec, Path) or (isinstance(spec, str) and "\n" not in spec and spec.endswith((".yaml", ".yml"))):
        try:
            return yaml.safe_load(Path(spec).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SpecError([("spec", message("spec_unreadable", path=spec, reason=exc))], str(spec)) from None
    if isinstance(spec, str):
        try:
            return yaml.safe_load(spec)
        except yaml.YAMLError as exc:
            raise SpecError([("spec", run_message("runs.spec_bad_yaml", error=exc))]) from None
    return spec


def submit(
    spec: RunSpec | dict | str | Path, *, name: str | None = None, tags: list[str] | None = None, start: bool = True
) -> str:
    """Validate (fields, cross-field and context rules), create the run folder with spec.yaml, queue the run and,
    with ``start``, schedule it. Raises SpecError listing every problem; no invalid spec reaches a process."""
    valid, errors, _warnings = validate_spec(_as_spec_data(spec))
    if errors or valid is None:
        raise SpecError(errors or [("spec", run_message("runs.spec_invalid"))])
    errors = _output_problems(valid) + _data_problems(valid)
    if errors:
        raise SpecError(errors)
    run_id, rdir = _claim_run_dir()
    if valid.output.output_dir:  # absolute, so the trainer (cwd: the repo) and the registry agree on it
        valid.output.output_dir = str(_output_dir(valid, rdir))
    save_spec(valid, rdir / "spec.yaml")
    default_name = f"{valid.method.stage}-{valid.method.finetuning}-{Path(valid.model.name_or_path).name}"
    rec = RunRecord(
        id=run_id,
        name=name or valid.output.run_name or default_name,
        status="queued",
        created=time.time(),
        run_dir=str(rdir),
        output_dir=str(_output_dir(valid, rdir)),
        spec=dump_spec(valid),
        share_gpus=valid.launch.share_gpus,
        tags=list(tags or []),
    )
    run_id = _insert(rec)
    if start:
        schedule()
    return run_id


def submit_command(
    argv: list[str], *, name: str | None = None, tags: list[str] | None = None, gpus: int = 0, start: bool = True
) -> str:
    """Queue any command (a merge, an export, a benchmark) under the same supervision as a training run:
    detached, logged to train.log, exit recorded, GPUs (a count) allocated by the scheduler, the same explicit
    environment as a trainer (``engine.launch.subprocess_env``). ``{run_dir}`` in an argument is replaced by the
    run's folder, so a command can write its events there."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise RunsError(run_message("runs.bad_command"))
    run_id, rdir = _claim_run_dir()
    argv = [a.replace("{run_dir}", str(rdir)) for a in argv]
    rec = RunRecord(
        id=run_id,
        name=name or Path(argv[0]).name,
        status="queued",
        created=time.time(),
        run_dir=str(rdir),
        output_dir=str(rdir),
        kind="command",
        command=list(argv),
        gpu_count=max(0, int(gpus)),
        tags=list(tags or []),
    )
    run_id = _insert(rec)
    if start:
        schedule()
    return run_id


# Datasets up to this size are read row by row at submit, so bad data is refused before anything is queued; larger
# ones are checked by the trainer (engine.data), still before a model is loaded.
SUBMIT_DATA_CHECK_BYTES = 64 << 20


def _data_problems(spec: RunSpec) -> list[tuple[str, str]]:
    from engine import dataset_registry as reg
    from engine.spec import resolve_dataset_dir

    ddir = resolve_dataset_dir(spec)
    try:
        info = reg.read_dataset_info(ddir)
        size = 0
        for name in spec.data.datasets:
            path = Path(str(info[name]["file_name"])).expanduser()
            path = path if path.is_absolute() else ddir / path
            size += (
                sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size
            )
    except (OSError, ValueError, KeyError, TypeError):
        size = 0  # validate_spec's context rules name a broken registry; the row check below names a missing file
    if size > SUBMIT_DATA_CHECK_BYTES:
        return []
    return [("data.datasets", p.located()) for p in reg.check_datasets(spec.data.datasets, ddir, spec.method.stage)]


def _output_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """An output folder that cannot be created or written is refused here, not found out by the trainer."""
    if not spec.output.output_dir:
        return []
    out = _output_dir(spec, workspace.runs_dir())
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return [("output.output_dir", message("output_is_file", path=out, probe=probe))]
    if not os.access(probe, os.W_OK | os.X_OK):
        return [("output.output_dir", message("output_not_writable", probe=probe))]
    return []


def _output_dir(spec: RunSpec, rdir: Path) -> Path:
    if not spec.output.output_dir:
        return rdir
    out = Path(spec.output.output_dir).expanduser()
    return out if out.is_absolute() else (workspace.home() / out)


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
    from engine import scheduler

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
        if scheduler.runner_alive(rec) or scheduler.run_processes(rec.id):
            continue
        # Look once more: the wrapper may have written exit.json between our two reads.
        ex = read_exit(rec.run_dir)
        rc, sig = (ex.get("returncode"), ex.get("signal")) if ex else (None, None)
        changed.append(finalize(rec.id, rc, sig))
    return changed


# ----------------------------------------------------------------------------------------------- actions
def schedule() -> list[str]:
    """Start queued runs whose GPUs (or CPU slot) are free; returns the ids started. See engine.scheduler."""
    from engine import scheduler

    return scheduler.schedule()


def stop(run_id: str, grace_s: float | None = None) -> bool:
    """Stop a run: a queued one leaves the queue; a running one gets SIGTERM (the trainer saves a checkpoint and
    exits), SIGKILL after ``grace_s`` (default STUDIO_STOP_GRACE, 120 s). True when no process of the run remains."""
    from engine import scheduler

    return scheduler.stop_run(run_id, grace_s)


def delete(run_id: str, remove_files: bool = True) -> None:
    """Forget a run and (by default) delete its folder and an output folder inside the workspace."""
    rec = get(run_id)
    if rec.status == "running":
        raise RunsError(run_message("runs.delete_running", id=run_id))
    with transaction() as conn:
        conn.execute("DELETE FROM runs WHERE id = ? AND status != 'running'", (run_id,))
    if remove_files:
        shutil.rmtree(rec.run_dir, ignore_errors=True)
        out = Path(rec.output_dir)
        # Never delete a user's folder outside the workspace: only outputs Studio placed under runs/.
        if out.exists() and out.resolve().is_relative_to(workspace.runs_dir().resolve()):
            shutil.rmtree(out, ignore_errors=True)


def rename(run_id: str, name: str) -> None:
    name = name.strip()
    if not name or len(name) > 120:
        raise RunsError(run_message("runs.bad_name"))
    if not update(run_id, name=name):
        raise RunsError(run_message("runs.unknown", id=run_id))


def set_tags(run_id: str, tags: list[str]) -> None:
    clean = sorted({t.strip() for t in tags if t and t.strip()})
    if not update(run_id, tags=clean):
        raise RunsError(run_message("runs.unknown", id=run_id))


def duplicate(run_id: str) -> RunSpec:
    """The run's spec, to edit and submit again."""
    rec = get(run_id, refresh_status=False)
    if rec.kind != "train":
        raise RunsError(run_message("runs.is_command", id=run_id))
    return rec.load_spec()


def resume(run_id: str) -> str:
    """A new run that continues this one from its newest checkpoint (train.resume_from='last' in its output)."""
    rec = get(run_id)
    if rec.status == "running":
        raise RunsError(run_message("runs.still_running", id=run_id))
    data = spec_to_dict(duplicate(run_id))
    data["train"]["resume_from"] = "last"
    data["output"]["output_dir"] = rec.output_dir
    return submit(data, name=f"{rec.name} (resumed)", tags=[*rec.tags, f"resume-of:{run_id}"])
