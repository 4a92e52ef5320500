"""A user's reward function in a confined process: one long-lived worker per reward (``engine.trainer.reward_worker``),
started once and fed each batch over a pipe, so a training step pays a round trip, not a Python start.

Runs in the trainer and the reward dry run (stdlib only itself). The worker gets:
- an environment of its own: ``PATH``, the locale, ``HOME``, ``TMPDIR``, one thread for the math libraries and the
  run's ``STUDIO_RUN_ID`` marker (so a run's stop and reaping find it); no token, key or password of the trainer's;
- its limits, set by the worker before the user's file is imported: ``timeout_s`` seconds of CPU time for the import
  and for each call (``RLIMIT_CPU``), ``STUDIO_REWARD_MEMORY_MB`` of address space (``RLIMIT_AS``, default 4096);
  and from here, a call that waits (sleeps, blocks) is stopped ``WAIT_GRACE_S`` seconds after ``timeout_s``;
- no network where the machine allows: a network namespace of its own (``unshare -n`` as root, ``unshare -rn``
  through a user namespace otherwise). Where neither works the worker runs with the machine's network, and
  ``Worker.note`` says so (the trainer prints it to the run's log, the dry run shows it).

A worker that ended (its limit, a crash) is started again for the next call; the call that ended it raises
``WorkerError`` with the reason in words.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

WORKER = Path(__file__).resolve().with_name("reward_worker.py")
ENV_MEMORY = "STUDIO_REWARD_MEMORY_MB"
DEFAULT_MEMORY_MB = 4096
WAIT_GRACE_S = 5.0
_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR", "STUDIO_RUN_ID")
_NETNS: list[list[str] | str] = []  # this process's answer, found once: the prefix, or why there is none


class WorkerError(RuntimeError):
    """The worker could not answer: its import failed, it ran past a limit, or it ended."""


def worker_env() -> dict[str, str]:
    """The worker's whole environment: nothing but what Python and the math libraries need."""
    env = {k: os.environ[k] for k in _KEEP if os.environ.get(k)}
    env.setdefault("PATH", "/usr/bin:/bin")
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONIOENCODING="utf-8")
    return env


def network_prefix() -> tuple[list[str], str]:
    """(the command that puts the worker in a network namespace of its own, ``[]`` where none can be had here; a
    note saying why not, or ``""``)."""
    if not _NETNS:
        tool = shutil.which("unshare")
        found: list[str] | str = "the unshare command is not installed"
        for prefix in ([tool, "-n"], [tool, "-rn"]) if tool else ():
            try:
                ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
            if ok:
                found = prefix
                break
        else:
            if tool:
                found = "neither unshare -n nor unshare -rn is permitted here (no root, no user namespaces)"
        _NETNS.append(found)
    got = _NETNS[0]
    return (got, "") if isinstance(got, list) else ([], f"reward code runs with this machine's network: {got}")


def memory_mb() -> int:
    try:
        return max(0, int(os.environ.get(ENV_MEMORY) or DEFAULT_MEMORY_MB))
    except ValueError:
        return DEFAULT_MEMORY_MB


def _plain(value: Any) -> Any:
    """A keyword argument as JSON: TRL's ``trainer_state`` as its plain fields (an object with attributes in the
    worker), arrays as lists; what cannot travel (TRL's ``log_metric`` callbacks) is left out by the caller."""
    if is_dataclass(value) and not isinstance(value, type):
        return {
            "__ns__": {k: v for k, v in asdict(value).items() if isinstance(v, (int, float, str, bool, type(None)))}
        }
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


class Worker:
    """The confined process of one reward function (``path``'s ``function``), with ``timeout_s`` CPU seconds a call."""

    def __init__(self, path: str | Path, function: str, timeout_s: float) -> None:
        self.path, self.function, self.timeout_s = str(path), function, float(timeout_s)
        self.proc: subprocess.Popen | None = None
        self.to_worker = self.from_worker = -1
        prefix, self.note = network_prefix()
        self.prefix = prefix
        self.start()

    def start(self) -> None:
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        argv = [*self.prefix, sys.executable, "-I", str(WORKER), str(r_in), str(w_out)]
        argv += [self.path, self.function, repr(self.timeout_s), str(memory_mb())]
        try:
            self.proc = subprocess.Popen(
                argv,
                env=worker_env(),
                cwd=str(Path(self.path).parent),
                stdin=subprocess.DEVNULL,
                pass_fds=(r_in, w_out),
                close_fds=True,
            )
        finally:
            os.close(r_in)
            os.close(w_out)
        self.to_worker, self.from_worker, self._buffer = w_in, r_out, b""
        first = self._answer(self.timeout_s + WAIT_GRACE_S, "importing it")
        if "failed" in first:
            self.close()
            raise WorkerError(f"the reward file {self.path} did not import: {first['failed']}")

    def __call__(self, prompts: list, completions: list, kwargs: dict) -> dict:
        """The worker's answer for one batch (see ``engine.trainer.reward_worker``)."""
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self.start()
        sent = {k: v for k, v in kwargs.items() if not callable(v)}
        line = json.dumps({"prompts": prompts, "completions": completions, "kwargs": sent}, default=_plain) + "\n"
        data = line.encode("utf-8")
        try:
            while data:  # past the pipe's buffer, a write waits for the worker to read, which it does
                data = data[os.write(self.to_worker, data) :]
        except OSError:
            pass  # the worker ended: _answer says how
        return self._answer(self.timeout_s + WAIT_GRACE_S, f"a batch of {len(completions)} completions")

    def _answer(self, wait_s: float, what: str) -> dict:
        deadline = time.monotonic() + wait_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready = select.select([self.from_worker], [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                self.close()
                raise WorkerError(f"took longer than its time limit ({self.timeout_s:g} s) on {what}")
            chunk = os.read(self.from_worker, 1 << 16)
            if not chunk:
                raise WorkerError(self._ended(what))
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _ended(self, what: str) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        if code == -signal.SIGXCPU:
            return f"used more than its CPU-time limit ({self.timeout_s:g} s) on {what} and was stopped"
        if code is not None and code < 0:
            return f"ended by signal {signal.Signals(-code).name} on {what}"
        return f"ended (exit code {code}) on {what}"

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_worker, self.from_worker):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_worker = self.from_worker = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit
            pass
