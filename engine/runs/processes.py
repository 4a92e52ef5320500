"""A run's processes: found by the ``STUDIO_RUN_ID`` marker in their environment (every process of a run inherits it,
even DDP ranks that torch starts in their own sessions), whether its detached wrapper still lives, and signals to the
run's processes and process group.

Light: stdlib, psutil.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from engine.runs.records import RunRecord

MARKER = "STUDIO_RUN_ID"
WRAPPER_MODULE = "engine.runs.runner"


def _is_run_process(proc: psutil.Process, run_id: str) -> bool:
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return proc.environ().get(MARKER) == run_id
    except (psutil.Error, OSError):
        return False


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


def entry_module(proc: psutil.Process) -> str | None:
    """The module ``proc`` runs (``python [-u ...] -m <module>``), or None (a script, ``-c``, not Python, gone)."""
    try:
        args = proc.cmdline()
    except (psutil.Error, OSError):
        return None
    rest = iter(args[1:])
    for arg in rest:
        if arg == "-m":
            return next(rest, None)
        if arg in ("-X", "-W"):  # interpreter options with a value
            next(rest, None)
        elif not arg.startswith("-"):
            return None
    return None


def is_rank(proc: psutil.Process) -> bool:
    """Whether ``proc`` runs one of the engine's trainer entries (``python [-u ...] -m engine.trainer.<job>``): a
    rank, not the launcher above it (accelerate's, torch's elastic agent, DeepSpeed's) nor a data-loader worker."""
    return (entry_module(proc) or "").startswith("engine.trainer.")


def is_wrapper(proc: psutil.Process) -> bool:
    """Whether ``proc`` is a run's detached wrapper (``python -m engine.runs.runner``), which holds no GPU or CPU slot
    of its own: it starts the run's processes and records their end."""
    return entry_module(proc) == WRAPPER_MODULE


def ask_to_stop(procs: list[psutil.Process], pgid: int | None = None) -> None:
    """SIGTERM, the trainer's "save a checkpoint and stop", to the run's ranks only when it has any: a launcher
    answers SIGTERM by killing its ranks a few seconds later (accelerate's simple launcher after 5 s, torch's
    elastic agent after 30 s), before a checkpoint of any size is saved, and ends by itself once they have. A run
    without ranks (a command that is not a trainer entry): every process and the group, as ``signal_all``."""
    ranks = [p for p in procs if is_rank(p)]
    if ranks:
        signal_all(ranks, signal.SIGTERM)
    else:
        signal_all(procs, signal.SIGTERM, pgid)


def _pgid_of(proc: psutil.Process) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except OSError:
        return None


def marked_processes(run_id: str, skip: set[int] | None = None) -> list[psutil.Process]:
    """Live (non-zombie) processes carrying the run's marker, except this process and ``skip``."""
    skip = {os.getpid(), *(skip or set())}
    return [p for p in psutil.process_iter() if p.pid not in skip and _is_run_process(p, run_id)]
