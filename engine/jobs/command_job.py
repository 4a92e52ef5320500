"""The one shape of a job over a command run of the registry (merges, exports, pushes, downloads, GGUF imports,
evaluations): its state read back from the registry and its events, waiting for its end, following it at a terminal,
cancelling it.

A subclass says what it is (``what``, for messages), which events are its own (``events_prefix``: it writes
``<prefix>_progress``, ``<prefix>_finished`` and ``<prefix>_failed``), where its worker leaves a partial folder
when killed, that folder (``tmp_dir``), and what its ``poll`` reports beside the common fields (``fields``). Light:
stdlib.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core import events as ev
from engine.core.messages import Message, from_exception, payload_message
from engine.runs import records
from engine.runs import registry as runs

# the registry's run status -> the job's state
STATES = {
    "queued": "queued",
    "running": "running",
    "completed": "finished",
    "failed": "failed",
    "stopped": "cancelled",
}


@dataclass
class JobState:
    """What ``CommandJob.read`` found: the registry's record, the state (queued, running, finished, failed,
    cancelled), the job's end event (its finished or failed event, None before), the newest progress payload, the
    error (a catalog message where the worker wrote its key) and the partial folder removed now, if any."""

    rec: Any
    state: str
    end: dict | None
    progress: dict | None
    error: Any
    cleaned: Path | None

    @property
    def result(self) -> dict | None:
        """The finished event's payload (None unless finished)."""
        return self.end["payload"] if self.state == "finished" and self.end else None

    @property
    def detail(self) -> str:
        """The progress's words (a catalog message where the worker wrote its key)."""
        return (payload_message(self.progress, "detail") or "") if self.progress else ""


class CommandJob:
    what = "job"  # for the time-out message
    events_prefix = ""
    run_id: str
    events_path: Path
    tmp_dir: Path | None = None

    def _read_events_from(self, events_path: str | Path) -> None:
        """Start reading the job's events from their beginning (``read`` goes on from where it stopped)."""
        self.events_path = Path(events_path)
        self.events: list[dict] = []
        self._offset = 0

    def read(self) -> JobState:
        """The job's state now, from the registry (refreshed: exit record, then the liveness of its processes) and
        the events written since the last read. The events decide what happened: a stop that came after the
        worker published its result is a finished job; a run that exited 0 without its finished event failed; a
        failed event with cause ``cancelled`` is a cancelled job. Once the job has ended, a partial folder the
        worker could not remove (killed) is removed."""
        rec = runs.get(self.run_id)
        new, self._offset = ev.read_events(self.events_path, self._offset)
        self.events += new
        p = self.events_prefix
        end = next((e for e in reversed(self.events) if e["type"] in (f"{p}_finished", f"{p}_failed")), None)
        done = end is not None and end["type"] == f"{p}_finished"
        state = STATES.get(rec.status, "failed")
        if state in ("failed", "cancelled") and done:
            state = "finished"
        if state == "finished" and not done:
            state = "failed"
        error = None
        if state in ("failed", "cancelled"):
            if end is not None and end["payload"].get("cause") == "cancelled":
                state = "cancelled"
            error = (payload_message(end["payload"], "error") if end else None) or rec.reason or state
        cleaned = None
        if state not in ("queued", "running") and self.tmp_dir is not None and self.tmp_dir.exists():
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
            cleaned = self.tmp_dir
        progress = next((e["payload"] for e in reversed(self.events) if e["type"] == f"{p}_progress"), None)
        return JobState(rec, state, end, progress, error, cleaned)

    def poll(self) -> dict:
        """The job now, as every kind reports it: ``run_id``, ``state`` (queued, running, finished, failed,
        cancelled), ``error``, ``events`` and ``created``, then what the kind adds (``fields``)."""
        s = self.read()
        common = {"run_id": self.run_id, "state": s.state, "error": s.error, "events": list(self.events)}
        return {**common, "created": s.rec.created, **self.fields(s)}

    def fields(self, s: JobState) -> dict:
        """What this kind of job reports beside the common fields, from the state ``read`` found."""
        return {}

    def wait(self, timeout: float | None = None, interval: float = 0.3) -> dict:
        deadline = None if timeout is None else time.time() + timeout
        while True:
            status = self.poll()
            if status["state"] not in ("queued", "running"):
                return status
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"{self.what} {self.run_id} still {status['state']} after {timeout} s")
            time.sleep(interval)

    def follow(
        self, lines: Callable[[dict], Iterable[str]] | None = None, *, label: str = "", interval: float = 0.3
    ) -> dict:
        """Poll to the end at a terminal and return the last ``poll()``: each poll's news printed as ``lines`` says
        (each kind says its own: its new events, a new step, a count; ``new_events`` / ``new_detail``), a queued
        job's wait said once under ``label``; Ctrl-C cancels the job."""
        said_queued = False
        try:
            while True:
                status = self.poll()
                if label and status["state"] == "queued" and not said_queued:
                    print(f"[{label}] queued as run {self.run_id}: waiting for a free slot (`studio queue list`)")
                    said_queued = True
                for line in lines(status) if lines else ():
                    print(line, flush=True)
                if status["state"] not in ("queued", "running"):
                    return status
                time.sleep(interval)
        except KeyboardInterrupt:
            return self.cancel()

    def cancel(self, grace: float = 10.0) -> dict:
        """SIGTERM the run's process group (the command cleans up and exits), SIGKILL after ``grace``."""
        runs.stop(self.run_id, grace_s=grace)
        return self.poll()


def job_record(
    run_id: str, modules: str | Iterable[str], refuse: Callable[[Message], Exception], not_this: Message
) -> tuple[records.RunRecord, list[str]]:
    """(the registry record, its command's arguments after ``-m module``) of the command run ``run_id`` when it runs
    one of ``modules`` (a job's entry module, or its names over time). Otherwise ``refuse(...)`` is raised: with the
    registry's message for an unknown id, with ``not_this`` for a run that is not this kind of job. Every kind of job
    is read back from its run this way."""
    try:
        rec = runs.get(run_id, refresh_status=False)
    except records.RunsError as exc:
        raise refuse(from_exception(exc)) from None
    argv = rec.command or []
    names = (modules,) if isinstance(modules, str) else tuple(modules)
    if rec.kind != "command" or len(argv) < 3 or argv[1] != "-m" or argv[2] not in names:
        raise refuse(not_this)
    return rec, argv[3:]


def new_events(describe: Callable[[dict], str], keep: Callable[[dict], bool] | None = None):
    """For ``follow``: each poll's events not printed yet (those ``keep`` takes), in ``describe``'s words."""
    seen = 0

    def lines(status: dict) -> list[str]:
        nonlocal seen
        out = [describe(e) for e in status["events"][seen:] if keep is None or keep(e)]
        seen = len(status["events"])
        return out

    return lines


def new_detail(label: str, more: Callable[[dict], str] | None = None):
    """For ``follow``: the job's progress words (``poll()["detail"]``) each time they change, under ``label``, with
    what ``more`` adds from the same poll."""
    said = ""

    def lines(status: dict) -> list[str]:
        nonlocal said
        detail = str(status.get("detail") or "")
        if not detail or detail == said:
            return []
        said = detail
        return [f"[{label}] {detail}" + (more(status) if more else "")]

    return lines


def newest_jobs(
    tag: str,
    make,
    refused: type[Exception] | tuple[type[Exception], ...],
    limit: int,
    keep=None,
    refresh_status: bool = True,
) -> list:
    """The newest command runs tagged ``tag`` read back as jobs (``make(run_id)``), at most ``limit``; a run that
    ``make`` refuses (``refused``: not this kind of job after all) is skipped, and so is a job ``keep(job)`` says no
    to. Shared by the merge, export, serve, download and evaluation lists."""
    found = []
    for rec in runs.list_runs(refresh_status=refresh_status):
        if rec.kind == "command" and tag in rec.tags:
            try:
                job = make(rec.id)
            except refused:
                continue
            if keep is None or keep(job):
                found.append(job)
            if len(found) >= limit:
                break
    return found
