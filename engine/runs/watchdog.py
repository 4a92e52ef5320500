"""The queue's watchdog: a queue that always moves, stops that always finish, runs that stall said so.

Light: stdlib, engine.runs.store / scheduler. ``check()`` is one look: runs whose wrapper died are reaped (their end
recorded from the folder, ``store.refresh``), stops overdue past their grace period are finished (SIGKILL,
``scheduler.overdue_stops``) and the queue is scheduled. The studio runs it on a background thread every
``STUDIO_WATCHDOG_S`` seconds (``start``: not a page timer, which only ticks while a browser is open); ``studio runs
list`` and ``studio queue list`` run it once. Without it a second run stays queued with a free slot when the first
run's wrapper is SIGKILLed (the wrapper is what schedules the next run).

Stalls: a running training run whose trainer has written nothing (events.jsonl, train.log) for longer than
``STUDIO_STALL_FACTOR`` (10) times the longest gap between its events so far, and at least ``STUDIO_STALL_FLOOR``
(120) seconds, reads "stalled (no progress for ...)" (``stalled_for``, ``status_text``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

from engine.runs import heal as heal_mod
from engine.runs import records, run_end, scheduler, store
from engine.runs.messages import message as run_message

TAIL_BYTES = 64 * 1024  # the stall threshold is measured on the events in this much of the file's end


def _env_float(name: str, default: float, low: float) -> float:
    try:
        return max(low, float(os.environ.get(name, default)))
    except ValueError:
        return default


def interval_s() -> float:
    return _env_float("STUDIO_WATCHDOG_S", 5.0, 0.2)


def stall_floor_s() -> float:
    return _env_float("STUDIO_STALL_FLOOR", 120.0, 1.0)


def stall_factor() -> float:
    return _env_float("STUDIO_STALL_FACTOR", 10.0, 1.0)


# ----------------------------------------------------------------------------------------------- one look
def check() -> list[str]:
    """Reap dead runners, finish overdue stops, schedule the queue; returns the runs started. Never raises (a
    damaged registry is healed and the look is tried on the next tick)."""
    try:
        scheduler.overdue_stops()
        return scheduler.schedule()  # refresh() first: a run whose wrapper died is recorded as ended
    except sqlite3.DatabaseError as exc:
        if heal_mod.is_corrupt(exc):
            heal_mod.heal(exc)
        else:
            print(f"studio watchdog: {run_end.write_problem(exc, store.workspace.home()) or exc}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - the watchdog outlives any one bad look
        print(f"studio watchdog: {type(exc).__name__}: {exc}", file=sys.stderr)
    return []


class Watchdog:
    """``check()`` every ``interval`` seconds on a daemon thread until ``stop()``."""

    def __init__(self, interval: float | None = None):
        self.interval = interval if interval is not None else interval_s()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="studio-watchdog", daemon=True)
        self.ticks = 0

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            check()
            self.ticks += 1
            self._stop.wait(self.interval)

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


_RUNNING: Watchdog | None = None
_LOCK = threading.Lock()


def start(interval: float | None = None) -> Watchdog:
    """The process's one watchdog (started on the first call; later calls return it)."""
    global _RUNNING
    with _LOCK:
        if _RUNNING is None or not _RUNNING.alive:
            _RUNNING = Watchdog(interval).start()
        return _RUNNING


# ----------------------------------------------------------------------------------------------- stalls
def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _tail_events(path: Path) -> list[dict]:
    """The events in the last TAIL_BYTES of the file (a torn first line is skipped as corrupt)."""
    from engine.core import events

    try:
        objs, _ = events.read_jsonl(path, max(0, path.stat().st_size - TAIL_BYTES))
    except OSError:
        return []
    return objs


def _progress_times(objs: list[dict]) -> list[float]:
    """The times of the run's own events: an alert is the wrapper's word about the run (a stall among them)."""
    return [float(o["ts"]) for o in objs if isinstance(o.get("ts"), (int, float)) and o.get("type") != "alert"]


WRAPPER_PREFIX = b"[studio runner] "  # engine.runs.runner's own lines in train.log


def _events_progress(path: Path, objs: list[dict]) -> float:
    """When the run last wrote an event: the file's mtime, unless its last event (of ``objs``, the file's tail) is an
    alert: then the time of the last event before it."""
    mtime = _mtime(path)
    if not mtime or not objs or objs[-1].get("type") != "alert":
        return mtime
    times = _progress_times(objs)
    return times[-1] if times else 0.0


def _log_progress(path: Path) -> float:
    """When the run last wrote to train.log: its mtime, unless the last line is the wrapper's own (a health alert
    saying the run stalled must not read as the run's progress)."""
    mtime = _mtime(path)
    if not mtime:
        return 0.0
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    except OSError:
        return mtime
    return 0.0 if lines and lines[-1].startswith(WRAPPER_PREFIX) else mtime


def _limit(objs: list[dict]) -> float:
    times = _progress_times(objs)
    gaps = [b - a for a, b in zip(times, times[1:]) if b >= a]
    return max(stall_floor_s(), stall_factor() * max(gaps, default=0.0))


def stall_limit_s(rec: records.RunRecord) -> float:
    """How long this run may stay silent: N x the longest gap between its events so far, at least the floor."""
    return _limit(_tail_events(rec.events_path))


def stalled_for(rec: records.RunRecord, now: float | None = None) -> float | None:
    """Seconds since a running training run last wrote anything, when that is past its limit; else None. The
    events file's tail is read once for both."""
    if rec.status != "running" or rec.kind != "train" or not rec.started:
        return None
    objs = _tail_events(rec.events_path)
    last = max(rec.started, _events_progress(rec.events_path, objs), _log_progress(rec.log_path))
    idle = (now or time.time()) - last
    return idle if idle > _limit(objs) else None


def format_idle(seconds: float) -> str:
    """Coarse on purpose (10 s, then minutes), so a page redraws a stalled status seldom."""
    s = int(seconds)
    if s < 120:
        return f"{s // 10 * 10}s"
    if s < 3600:
        return f"{s // 60}m"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


def status_text(rec: records.RunRecord):
    """The status to show: the Message "stalled (no progress for ...)" for a stalled run, else the status."""
    idle = stalled_for(rec)
    return run_message("runs.stalled", duration=format_idle(idle)) if idle is not None else rec.status
