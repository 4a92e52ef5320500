"""The detached wrapper of one run: ``python -m engine.runs.runner [--detach] <run_dir>``.

Light: stdlib, psutil, engine.runs.registry / events / metrics / scheduler; never torch. With ``--detach`` it forks,
prints the child's pid and exits, so the process that started it (the studio) reaps it at once and the run belongs to
no studio; the child calls ``setsid`` and becomes a child subreaper, so ranks orphaned by a dead launcher are
re-parented to it and reaped here (no zombies).

It reads ``argv`` from ``launch.json`` and gives the trainer its own environment, which it received in memory from
the scheduler: no secret is written to the run folder. The trainer runs in its own session and process group,
stdout+stderr appended to ``train.log``; a metrics sampler thread writes ``metrics.jsonl`` while it lives, and a
health thread (``engine.watch.sentinel``) notifies the run's alerts and judges what the trainer cannot (no progress,
the GPUs); the run's end is notified once it is recorded. When the
trainer ends, stragglers of the run are ended, a ``failed`` event is added if the trainer left no terminal event,
``exit.json`` is written, the registry is updated and the queue is scheduled again.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.core import events, workspace
from engine.core.messages import to_json
from engine.runs import checkpoints, metrics, processes, records, run_end, scheduler, store, watchdog
from engine.runs import registry as runs
from engine.runs.messages import message as run_message
from engine.watch import health

PR_SET_CHILD_SUBREAPER = 36
# Room kept in the run folder while the trainer runs and freed when it ends, so that the end can still be written
# (the failed event, exit.json, the registry) when the trainer has filled the disk.
RESERVE = ".space-reserve"
RESERVE_BYTES = 1 << 20


def _detach() -> None:
    """Fork; the parent prints the child's pid and leaves; the child starts a new session."""
    r, w = os.pipe()
    pid = os.fork()
    if pid > 0:
        os.close(w)
        os.read(r, 1)  # wait until the child is in its own session before the caller may signal it
        print(pid, flush=True)
        os._exit(0)
    os.close(r)
    os.setsid()
    os.write(w, b"1")
    os.close(w)


def _become_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: orphans go to init, which reaps them


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _say(text: str) -> None:
    """A line in train.log; a full disk must not end the wrapper over its own log line."""
    try:
        print(f"[studio runner] {text}", flush=True)
    except OSError:
        pass


def _reserve(rdir: Path) -> None:
    try:
        with open(rdir / RESERVE, "wb") as fh:
            fh.write(b"\0" * RESERVE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        (rdir / RESERVE).unlink(missing_ok=True)


def _write_or_cause(rdir: Path, write) -> str | None:
    """Run one write of the run's end; if it fails, try once more, and return the named cause (disk full, I/O
    error) to record wherever something can still be written."""
    try:
        write()
        return None
    except (OSError, store.sqlite3.Error) as exc:
        problem = run_end.write_problem(exc, rdir) or run_message("runs.io_error", path=str(rdir), error=str(exc))
    (rdir / RESERVE).unlink(missing_ok=True)
    try:
        write()
    except (OSError, store.sqlite3.Error):
        pass
    return problem


def _write_json(path: Path, data: dict) -> None:
    """Written whole or not at all: a write that fails (a full disk) leaves no half or empty file behind."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


# While the end of a run cannot be written anywhere (a full disk), the wrapper keeps it in memory and tries again
# every END_RETRY_S seconds, for STUDIO_END_WAIT_S (default a day); ``exit.pending`` (empty: it fits on a full disk)
# says so meanwhile.
PENDING = "exit.pending"
END_RETRY_S = 0.5


def end_wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get("STUDIO_END_WAIT_S", "86400")))
    except ValueError:
        return 86400.0


def _record_end(run_id: str, rc: int, sig: str | None, problem, ended: float, written: list | None = None) -> bool:
    """The registry row from this process's memory: True when it is written (or the run was ended by someone);
    the record written is appended to ``written``."""
    try:
        final = store.finalize(run_id, rc, sig, problem=str(problem) if problem else None, ended=ended)
        if written is not None:
            written.append(final)
        return True
    except records.RunsError as exc:  # no row and no folder to read it back from: nothing to hold the end for
        _say(f"registry update failed: {exc}")
        return True
    except Exception as exc:  # noqa: BLE001 - a full disk, a locked registry: held and tried again
        _say(f"registry update failed: {run_end.write_problem(exc, workspace.home()) or exc}")
        return False


def _hold_end(rdir: Path, write_exit, record_end) -> None:
    """Keep trying to write exit.json and the registry row until both are written (or STUDIO_END_WAIT_S ends)."""
    pending = rdir / PENDING
    try:
        pending.touch()
    except OSError:
        pass
    deadline = time.time() + end_wait_s()
    exit_done = (rdir / "exit.json").is_file()
    row_done = False
    while True:
        if not row_done:
            row_done = record_end()
        if not exit_done:
            try:
                write_exit()
                exit_done = True
            except OSError:
                pass
        if (exit_done and row_done) or time.time() >= deadline:
            break
        time.sleep(END_RETRY_S)
    pending.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    detach = "--detach" in argv
    rest = [a for a in argv if a != "--detach"]
    if len(rest) != 1:
        print("usage: python -m engine.runs.runner [--detach] RUN_DIR", file=sys.stderr)
        return 2
    rdir = Path(rest[0]).resolve()
    launch = json.loads((rdir / "launch.json").read_text(encoding="utf-8"))
    if detach:
        _detach()
    # From here on nothing may escape: whatever happens, exit.json and the registry must be written.
    log = open(rdir / "train.log", "ab", buffering=0)  # noqa: SIM115 - lives as long as this process
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    return supervise(rdir, launch)


def supervise(rdir: Path, launch: dict) -> int:
    run_id = launch["run_id"]
    _become_subreaper()
    ev_path = rdir / "events.jsonl"
    environ = run_environment(launch)
    try:
        proc = subprocess.Popen(
            launch["argv"],
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=sys.stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(scheduler.ROOT),
        )
    except OSError as exc:
        events.append_event(ev_path, "failed", None, cause="config", error=f"cannot start {launch['argv'][0]}: {exc}")
        return _finish(rdir, run_id, 127, None)
    try:
        _write_json(
            rdir / "runner.json",
            {"runner_pid": os.getpid(), "pid": proc.pid, "pgid": proc.pid, "started": time.time()},
        )
    except OSError as exc:  # a full disk: the registry row below still has the pids
        _say(f"runner.json not written: {exc}")
    _reserve(rdir)
    try:
        store.update(run_id, only_if_status=("running",), pid=proc.pid, pgid=proc.pid, runner_pid=os.getpid())
    except Exception as exc:  # noqa: BLE001 - a locked or missing registry must not kill the run
        _say(f"registry update failed: {exc}")

    def forward(signum, _frame):  # someone stopped the wrapper: stop the run the same way
        procs = store.run_processes(run_id, {os.getpid()})
        if signum == signal.SIGTERM:
            processes.ask_to_stop(procs, proc.pid)
        else:
            processes.signal_all(procs, signum, proc.pid)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    stop_sampling = threading.Event()
    sampler = threading.Thread(
        target=metrics.sample_loop,
        name="metrics",
        daemon=True,
        args=(rdir, os.getpid(), launch.get("gpus") or [], stop_sampling),
    )
    sampler.start()
    sentinel = _sentinel(rdir, run_id, proc.pid, environ)
    stop_watch = threading.Event()
    watcher = None
    if sentinel is not None:
        watcher = threading.Thread(target=sentinel.loop, name="health", daemon=True, args=(stop_watch,))
        watcher.start()
    while True:
        try:
            rc = proc.wait()
            break
        except InterruptedError:
            continue
    free = run_end.disk_free(rdir)
    disk_full = free is not None and free < run_end.LOW_SPACE_BYTES
    (rdir / RESERVE).unlink(missing_ok=True)  # the trainer is gone: its room is ours to record the end
    _end_stragglers(run_id, proc.pid)
    stop_sampling.set()
    stop_watch.set()
    sampler.join(timeout=5)
    if watcher is not None:
        watcher.join(timeout=10)
    sig = signal.Signals(-rc).name if rc < 0 else None
    return _finish(rdir, run_id, rc, sig, disk_full=disk_full, sentinel=sentinel)


def run_environment(launch: dict) -> dict[str, str]:
    """The environment of the run's processes and notifications: this wrapper's (the studio's allow-listed one), with
    the run owner's own secrets in team mode and, for a member, none of the operator's it was not bound
    (``engine.core.member_secrets.run_environment``; ``launch.json`` names the owner and the variables, never a
    value)."""
    from engine.runs.launch import owner_environment

    names = [str(n) for n in launch.get("secret_names") or []]
    return owner_environment(dict(os.environ), str(launch.get("owner") or ""), names)


def _sentinel(rdir: Path, run_id: str, pgid: int, environ: dict[str, str]):
    """The health watch and notifications of a training run (engine.watch.sentinel); None for a command run or a spec
    that cannot be read (the trainer reports that itself)."""
    from engine.spec.schema import SpecError, load_spec
    from engine.watch.sentinel import Sentinel

    try:
        if runs.get(run_id, refresh_status=False).kind != "train":
            return None
        spec = load_spec(rdir / "spec.yaml", context=False)
    except (SpecError, OSError, KeyError, store.sqlite3.Error) as exc:
        _say(f"health watch off: {exc}")
        return None

    def stop_run() -> None:  # a rule set to stop: like the user's Stop, from here (SIGTERM, SIGKILL after the grace)
        processes.ask_to_stop(store.run_processes(run_id, {os.getpid()}), pgid)
        deadline = time.time() + scheduler.stop_grace_s()
        while time.time() < deadline and store.run_processes(run_id, {os.getpid()}):
            time.sleep(0.5)
        processes.signal_all(store.run_processes(run_id, {os.getpid()}), signal.SIGKILL, pgid)

    def stalled(now: float) -> tuple[float, float] | None:  # the watchdog's reading, not a second stall detector
        rec = store.get(run_id, refresh_status=False)
        idle = watchdog.stalled_for(rec, now)
        return None if idle is None else (idle, watchdog.stall_limit_s(rec))

    return Sentinel(rdir, run_id, spec, stop_run=stop_run, say=_say, environ=environ, stalled=stalled)


def _health_stop(rdir: Path):
    """(reason, rule, step) a rule of the watch gave when it stopped the run (engine.watch.health.STOP_FILE), or
    None."""
    from engine.core.messages import Message, from_json

    try:
        told = json.loads((rdir / health.STOP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    what = from_json(told.get("reason_msg")) or told.get("reason", "")
    what = what if isinstance(what, Message) else Message(str(what))
    return what, told.get("rule"), told.get("step")


def _end_stragglers(run_id: str, pgid: int) -> None:
    """The launcher is gone; ranks it started (own sessions) or orphans of its group must not train on alone."""
    left = store.run_processes(run_id, {os.getpid()})
    if left:
        _say(f"launcher exited; ending {len(left)} remaining process(es) of the run")
        processes.ask_to_stop(left, pgid)
        # a rank may still be saving its checkpoint: give it the same grace as a user's stop before ending it.
        deadline = time.time() + scheduler.stop_grace_s()
        while time.time() < deadline and store.run_processes(run_id, {os.getpid()}):
            _reap()
            time.sleep(0.2)
        processes.signal_all(store.run_processes(run_id, {os.getpid()}), signal.SIGKILL, pgid)
        time.sleep(0.2)
    _reap()


def _last_reported(ev_path: Path) -> tuple[int | None, str | None]:
    """(the last step the trainer reported, its newest checkpoint that is whole on disk) from its events: what a
    stopped run that could not say so itself leaves to resume from."""
    step, kept = None, None
    for ev in reversed(events.read_all(ev_path)):
        if step is None and ev.get("step") is not None and ev["type"] in ("log", "eval", "checkpoint"):
            step = ev["step"]
        path = (ev.get("payload") or {}).get("path")
        if kept is None and ev["type"] == "checkpoint" and path and checkpoints.complete(path):
            kept = str(path)
        if step is not None and kept is not None:
            break
    return step, kept


def _finish(rdir: Path, run_id: str, rc: int, sig: str | None, *, disk_full: bool = False, sentinel=None) -> int:
    """Record the end: a failed / stopped event when the trainer left none, exit.json, the registry, then the
    queue. A full disk (the trainer filled it) is named as the cause, in exit.json and the registry's reason."""
    ev_path = rdir / "events.jsonl"
    problem = None
    try:
        rec = runs.get(run_id, refresh_status=False)
        kind, stop_requested = rec.kind, rec.stop_requested
    except Exception:  # noqa: BLE001
        kind, stop_requested = "train", None
    if kind == "train" and events.last_event(ev_path, events.TERMINAL_TYPES) is None:
        tail = run_end.tail_text(rdir / "train.log", 30)
        how = run_message("runs.how_signal", signal=sig) if sig else run_message("runs.how_exit", code=rc)
        told = _health_stop(rdir)
        if told is not None:  # a health rule of the watch stopped it and the trainer could not say so itself
            what, rule, step = told
            reason = health.stop_reason(what, step, None, False)
            ev = {"reason": reason, "reason_msg": to_json(reason), "checkpoint": None, "health_rule": rule}
            problem = _write_or_cause(rdir, lambda: events.append_event(ev_path, "stopped", None, **ev))
        elif stop_requested is not None:
            step, kept = _last_reported(ev_path)
            reason = (
                run_message("runs.user_stop_kept", step=step, how=how, checkpoint=kept)
                if kept
                else run_message("runs.user_stop_early", how=how)
            )
            ev = {"reason": reason, "reason_msg": to_json(reason), "checkpoint": kept}
            problem = _write_or_cause(rdir, lambda: events.append_event(ev_path, "stopped", step, **ev))
        else:
            # accelerate reports a rank killed under it (the OOM killer, kill -9) only in its log
            m = re.search(r"died with <Signals\.(\w+): \d+>", tail)
            killed_by = sig or (m.group(1) if m else None)
            if killed_by:
                cause, error = "killed", run_message("runs.killed_by_signal", signal=killed_by)
            elif disk_full or "No space left on device" in tail:
                # the trainer could not even write its own failed event
                cause, error = "disk", run_message("runs.disk_full", path=str(rdir))
                problem = error
            else:
                cause, error = "other", run_message("runs.no_terminal_event", code=rc)
            ev = {"cause": cause, "error": error, "error_msg": to_json(error), "traceback": tail}
            problem = _write_or_cause(rdir, lambda: events.append_event(ev_path, "failed", None, **ev)) or problem
    elif kind == "train" and rc != 0 and disk_full:
        problem = run_message("runs.disk_full", path=str(rdir))
    record = {"returncode": rc, "ts": time.time(), "signal": sig}

    def write_exit() -> None:
        extra = {"problem": str(problem), "problem_msg": to_json(problem)} if problem else {}
        _write_json(rdir / "exit.json", {**record, **extra})

    problem = _write_or_cause(rdir, write_exit) or problem
    if problem and not (rdir / "exit.json").is_file():
        _say(f"exit.json not written: {problem}")
    ended: list = []  # the registry's record of the end, once written

    def record_end() -> bool:  # the end as it happened: its time, not when a later look finds it
        return _record_end(run_id, rc, sig, problem, record["ts"], ended)

    recorded = record_end()
    if sentinel is not None:
        final = ended[-1] if ended else None
        try:  # the end notice: never fails the run (engine.watch.notify logs what it could not deliver)
            sentinel.finish(final.status if final else "failed", final.reason if final else str(problem or ""))
        except Exception as exc:  # noqa: BLE001
            _say(f"notification failed: {exc}")
    if recorded:
        try:
            scheduler.schedule()  # the queue moves on even when no studio is open
        except Exception as exc:  # noqa: BLE001
            _say(f"scheduling the queue failed: {exc}")
    if not recorded or not (rdir / "exit.json").is_file():
        _hold_end(rdir, write_exit, record_end)
        if not recorded:
            try:
                scheduler.schedule()
            except Exception as exc:  # noqa: BLE001
                _say(f"scheduling the queue failed: {exc}")
    _reap()
    return 0


if __name__ == "__main__":
    sys.exit(main())
