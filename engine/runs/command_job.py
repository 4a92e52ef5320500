"""What every job over a command run of the registry shares (merges: ``engine.export.jobs.MergeJob``; downloads:
``engine.runs.downloads.DownloadJob``): waiting for its end and cancelling it. A subclass says what it is (``what``)
and how to read its state (``poll``, a dict with ``state`` among queued / running / ... ). Light: stdlib."""

from __future__ import annotations

import time

from engine.runs import registry as runs


class CommandJob:
    what = "job"  # for the time-out message
    run_id: str

    def poll(self) -> dict:
        raise NotImplementedError

    def wait(self, timeout: float | None = None, interval: float = 0.3) -> dict:
        deadline = None if timeout is None else time.time() + timeout
        while True:
            status = self.poll()
            if status["state"] not in ("queued", "running"):
                return status
            if deadline is not None and time.time() > deadline:
                raise TimeoutError(f"{self.what} {self.run_id} still {status['state']} after {timeout} s")
            time.sleep(interval)

    def cancel(self, grace: float = 10.0) -> dict:
        """SIGTERM the run's process group (the command cleans up and exits), SIGKILL after ``grace``."""
        runs.stop(self.run_id, grace_s=grace)
        return self.poll()


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
