"""The run registry's healing: the registry file is checked once per process before its first use; a damaged one is
kept aside (``registry.db.corrupt-<time>``) and rebuilt from the run folders, a missing one rebuilt when run folders
exist, and runs whose folder the registry lost are added back (``sync_folders``); what was healed is said on stderr
and to the page (``registry_notice``). Safe from several processes at once (a lock file, ``heal_lock``, which a
submit also holds while it writes a run's notes and its row). Called by ``engine.runs.store`` when it opens the
registry; never calls the store back.

Light: stdlib (sqlite3, fcntl), yaml, engine.core, engine.runs.records / run_end / processes / messages /
checkpoints.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from engine.core import weights, workspace
from engine.runs import checkpoints, outputs
from engine.runs.messages import message as run_message
from engine.runs.processes import marked_processes, runner_alive
from engine.runs.records import (
    CLAIM_TIMEOUT_S,
    RUN_NOTES,
    RunRecord,
    open_db,
    read_json,
    row_values,
    write_transaction,
)
from engine.runs.run_end import derive_final, ended_state, read_exit

_CHECKED: set[str] = set()  # registry paths this process has checked


NOTICE_FILE = "registry-notice.json"


def is_checked() -> bool:
    """Whether this process has checked the registry file it uses now (``ensure_registry``)."""
    return str(workspace.registry_path()) in _CHECKED


def is_corrupt(exc: BaseException) -> bool:
    """SQLITE_CORRUPT / SQLITE_NOTADB: the file is damaged (not: locked, read-only, disk full - OperationalError)."""
    return isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError)


_HELD = threading.local()  # how deep this thread is in heal_lock (it is re-entrant within a thread)


@contextmanager
def heal_lock() -> Iterator[None]:
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
    with heal_lock():
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
            open_db(create=True).close()
            return None
        return _rebuild(None)


def heal_missing():
    """The registry file was removed while this process uses it (by hand, by a cleanup): rebuild it from the run
    folders (once, whoever sees it first), never start over with an empty one. Stale -wal / -shm files of the removed
    file are removed with it, so they cannot be replayed into the new one."""
    path = workspace.registry_path()
    with heal_lock():
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
    known = _known_ids()
    if known is None or not set(candidates) - known:
        return 0
    count = 0
    with heal_lock():  # a submit writes run.json and its row under the same lock
        known = _known_ids()
        for run_id in sorted(set(candidates) - (known or set(candidates))):
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
    with heal_lock():
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
    open_db(create=True).close()
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

    data = read_json(workspace.home() / NOTICE_FILE)
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
    notes = read_json(rdir / RUN_NOTES) or {}
    if notes.get("forgotten"):  # deleted with --keep-files: its folder stays, the run is not listed again
        return 0
    launched = read_json(rdir / "launch.json")
    runner = read_json(rdir / "runner.json") or {}
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
        owner=str(notes.get("owner") or ""),
        shared=[str(n) for n in notes.get("shared") or [] if isinstance(n, str)],
    )
    final = notes.get("final") if isinstance(notes.get("final"), dict) else None
    ex = read_exit(rdir)
    if final and ex is None:  # ended without a wrapper: taken off the queue, could never start, failed to launch
        rec.status, rec.reason, rec.ended = final.get("status", "failed"), final.get("reason", ""), final.get("ended")
    elif launched is None and kind == "train" and (found := _training_output(rdir, spec)):
        # A folder that already holds weights was trained, by this or another studio: queued again, its trainer would
        # write over them. Listed as it ended (completed when its events say so), never queued.
        status, reason = derive_final(rec, None, None)
        if status != "completed":
            status, reason = "failed", run_message("runs.rebuilt_not_queued", path=found)
        rec.status, rec.reason, rec.ended = status, reason, Path(found).stat().st_mtime
    elif launched is not None:
        rec.status = "running"
        rec.gpus = list(launched.get("gpus") or [])
        rec.started = runner.get("started") or (rdir / "launch.json").stat().st_mtime
        rec.pid, rec.pgid = runner.get("pid"), runner.get("pgid")
        rec.runner_pid = runner.get("runner_pid") or 0  # 0, not None: None means "claimed, never launched"
    if rec.status == "running":  # how it ended, as ``refresh`` would record it (a run still alive stays running)
        if ex is not None:
            _ended(rec, ex.get("returncode"), ex.get("signal"), ex.get("problem"), ex.get("ts"))
        elif not (runner_alive(rec) or marked_processes(rec.id, {rec.runner_pid or 0})):
            _ended(rec, None, None)
    d = row_values(rec)
    with write_transaction(open_db()) as conn:
        added = conn.execute(
            f"INSERT OR IGNORE INTO runs ({', '.join(d)}) VALUES ({', '.join('?' * len(d))})", list(d.values())
        ).rowcount
    return int(bool(added))


def _training_output(rdir: Path, spec: dict) -> str:
    """The final weights or newest checkpoint a run already holds ('' when none): its final adapter or model where
    ``engine.core.weights`` finds a run's weights, or a ``checkpoints/checkpoint-*`` of its output folder."""
    adir, mdir = weights.run_weight_dirs(rdir, spec)
    if (adir / "adapter_config.json").is_file():
        return str(adir)
    if (mdir / "config.json").is_file():
        return str(mdir)
    out = adir if adir == mdir else adir.parent  # LLaMA-Factory's layout saves into the output folder itself
    found = checkpoints.newest_first(out / "checkpoints")
    return str(found[0]) if found else ""


def _ended(
    rec: RunRecord, returncode: int | None, signal_name: str | None, problem: str | None = None, ended=None
) -> None:
    rec.status, rec.reason = ended_state(rec, returncode, signal_name, problem)
    outputs.seal(rec.run_dir)
    rec.exit_code, rec.ended = returncode, ended or time.time()


def _known_ids() -> set[str] | None:
    """The run ids the registry holds; None when it cannot be read now (a full disk, a damaged file: the store's
    next connection heals or reads it)."""
    try:
        conn = open_db()
        try:
            return {r[0] for r in conn.execute("SELECT id FROM runs").fetchall()}
        finally:
            conn.close()
    except sqlite3.Error:
        return None
