"""How a run ended, read from its folder alone (no registry): the wrapper's ``exit.json``, the last terminal event,
the exit code or signal, the log's tail, and a full disk named as the cause (``disk full: no space left on device
under <path>``). ``engine.runs.store`` records the result; ``engine.runs.heal`` uses it for runs it reads back.

Light: stdlib, engine.core.events, engine.runs.messages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core import events
from engine.runs.messages import message as run_message

if TYPE_CHECKING:
    from engine.runs.records import RunRecord


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
    if rec.kind == "command":
        ends = events.DONE_TYPES + tuple(t.replace("_finished", "_failed") for t in events.DONE_TYPES)
        last_end = events.last_event(rec.events_path, ends)
        if last_end is not None and last_end["type"] in events.DONE_TYPES:  # complete when the stop (or kill) came
            return "completed", ""
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


LOG_TAIL = "\n--- last lines of train.log ---\n"  # between a failed run's reason and its log's last lines


def with_log_tail(reason: str, tail: str) -> str:
    return f"{reason}{LOG_TAIL}{tail}" if tail else reason


def without_log_tail(reason: str) -> str:
    """The reason alone, the log's last lines left where they belong (``studio train``'s one line)."""
    return reason.split(LOG_TAIL, 1)[0].strip()


def ended_state(
    rec: RunRecord, returncode: int | None, signal_name: str | None, problem: str | None = None, log_lines: int = 30
) -> tuple[str, str]:
    """(status, reason) to record for a run whose process tree has ended: ``derive_final``, and a failed run's reason
    followed by the last lines of its log."""
    status, reason = derive_final(rec, returncode, signal_name, problem)
    if status == "failed":
        tail = tail_text(rec.log_path, log_lines)
        reason = with_log_tail(reason, tail)
    return status, reason
