"""Following a job at a terminal (``engine.jobs.command_job.CommandJob.follow``), the loop every job's command
shares: what it prints of each poll, the queued wait said once, Ctrl-C cancelling the job."""

from __future__ import annotations

import pytest

from engine.jobs.command_job import CommandJob, new_detail, new_events


class Scripted(CommandJob):
    """A job whose polls are given: no registry, no process."""

    def __init__(self, polls: list[dict], interrupt_at: int | None = None) -> None:
        self.run_id = "r1"
        self.polls, self.interrupt_at, self.n, self.cancelled = polls, interrupt_at, 0, False

    def poll(self) -> dict:
        if self.n == self.interrupt_at:
            raise KeyboardInterrupt
        status = self.polls[min(self.n, len(self.polls) - 1)]
        self.n += 1
        return status

    def cancel(self, grace: float = 10.0) -> dict:
        self.cancelled = True
        return {"state": "cancelled"}


def ev(kind: str) -> dict:
    return {"type": kind, "payload": {}}


def test_each_event_is_said_once_and_the_queued_wait_once(capsys):
    polls = [
        {"state": "queued", "events": []},
        {"state": "queued", "events": []},
        {"state": "running", "events": [ev("merge_progress")]},
        {"state": "running", "events": [ev("merge_progress"), ev("other"), ev("merge_progress")]},
        {"state": "finished", "events": [ev("merge_progress"), ev("other"), ev("merge_progress"), ev("merge_done")]},
    ]
    job = Scripted(polls)
    keep = new_events(lambda e: e["type"], lambda e: e["type"].startswith("merge_"))
    assert job.follow(keep, label="merge", interval=0)["state"] == "finished"
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "[merge] queued as run r1: waiting for a free slot (`studio queue list`)",
        "merge_progress",
        "merge_progress",
        "merge_done",
    ]


def test_a_detail_is_said_when_it_changes(capsys):
    polls = [
        {"state": "running", "detail": "", "events": []},
        {"state": "running", "detail": "step 1", "events": []},
        {"state": "running", "detail": "step 1", "events": []},
        {"state": "failed", "detail": "step 2", "events": []},
    ]
    status = Scripted(polls).follow(new_detail("eval", lambda s: " (more)"), interval=0)
    assert status["state"] == "failed"
    assert capsys.readouterr().out.splitlines() == ["[eval] step 1 (more)", "[eval] step 2 (more)"]


@pytest.mark.parametrize("at", [0, 2])
def test_ctrl_c_cancels_the_job_and_returns_its_end(at, capsys):
    job = Scripted([{"state": "running", "events": []}], interrupt_at=at)
    assert job.follow(interval=0) == {"state": "cancelled"} and job.cancelled


def test_every_kind_reads_its_job_back_from_the_run_the_same_way(run_registry):
    """``job_record``: a run of the job's module gives its arguments; an unknown id gets the registry's message, a
    training run or another kind's command the kind's own, each as the kind's error (merge, download, evaluation and
    GGUF import alike)."""
    import sys

    from engine.core.messages import Message
    from engine.export import merge_jobs
    from engine.export.checks import ExportError
    from engine.jobs import downloads, evals, gguf_imports
    from engine.jobs.command_job import job_record
    from engine.models.gguf_file import GgufError
    from engine.models.hub_cache import DownloadError
    from engine.runs import registry as runs

    other = runs.submit_command([sys.executable, "-m", "engine.models.download", "org/model"], start=False)
    rec, args = job_record(other, downloads.WORKERS, ValueError, Message("no"))
    assert rec.id == other and args == ["org/model"]
    with pytest.raises(ValueError, match="^not a merge$"):
        job_record(other, "engine.trainer.merge", ValueError, Message("not a merge"))
    with pytest.raises(ValueError, match="20990101-000000-zz"):  # the registry's words for an id it does not have
        job_record("20990101-000000-zz", "engine.trainer.merge", ValueError, Message("not a merge"))
    with pytest.raises(ExportError, match=other):
        merge_jobs.MergeJob(other)
    with pytest.raises(GgufError, match=other):
        gguf_imports.GgufImportJob(other)
    with pytest.raises(evals.EvalError):
        evals.EvalJob(other)
    assert downloads.DownloadJob(other).repo == "org/model"
    with pytest.raises(DownloadError):
        downloads.DownloadJob("20990101-000000-zz")
