"""``studio push`` and the pushes that ``studio export --push`` starts: checks before any work, the push as a registry
run (tag ``push``), following and cancelling it. Light: stdlib, engine.export / engine.runs; the upload itself is
``python -m engine.export.push`` (huggingface_hub's client).

What is pushed: a folder (an export, a merged model, an adapter), or a run id: an export's or a merge's output
folder, a training run's adapter or model. Refused in one line before anything is queued: no such folder, a repo id
that is not ``owner/name``, ``HF_HUB_OFFLINE`` set, no token (``HF_TOKEN``, or the client's saved login).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from engine.export import sources
from engine.export.checks import ExportError
from engine.export.messages import message
from engine.jobs.command_job import CommandJob, job_record
from engine.runs import registry as runs

PUSH_TAG = "push"
MODULE = "engine.export.push"
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


def offline() -> bool:
    """huggingface_hub's own rule: HF_HUB_OFFLINE, or TRANSFORMERS_OFFLINE when that is unset."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


def has_token() -> bool:
    """Whether the push will have a token: ``HF_TOKEN`` as the push's process will see it (in team mode a member's
    own, or the operator's only where bound for the page: ``engine.core.member_secrets``), or the client's saved login
    where that may be used."""
    from engine.core import accounts
    from engine.runs.launch import owner_environment

    env = owner_environment(dict(os.environ), accounts.owner_of_new())
    if env.get("HF_TOKEN"):
        return True
    if env.get("HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        return False
    try:
        from huggingface_hub import get_token

        return bool(get_token())
    except Exception:  # noqa: BLE001 - no token store: no token
        return False


def push_folder(source: str) -> Path:
    """The folder a source names (see the module's docstring); ExportError naming what is missing."""
    p = Path(source).expanduser()
    if p.is_dir():
        return p.resolve()
    try:
        rec = runs.get(source, refresh_status=False)
    except Exception:  # noqa: BLE001 - not a run id either
        raise ExportError(message("export.no_source", path=source)) from None
    argv = rec.command or []
    if rec.kind == "command" and "--out" in argv:
        out = Path(argv[argv.index("--out") + 1])
        if out.is_dir():
            return out
        raise ExportError(message("export.push_no_output", run=source, path=out))
    return Path(sources.resolve_source(source).weights_dir)


def check_push(source: str, repo: str) -> Path:
    if not REPO_ID.match(repo or ""):
        raise ExportError(message("export.push_bad_repo", repo=repo))
    folder = push_folder(source)
    if offline():
        raise ExportError(message("export.push_offline_refused", repo=repo))
    if not has_token():
        raise ExportError(message("export.push_no_token_refused", repo=repo))
    return folder


class PushJob(CommandJob):
    what = "push"
    events_prefix = "push"

    def __init__(self, run_id: str):
        rec, args = job_record(run_id, MODULE, ExportError, message("export.not_push", id=run_id))
        from engine.export.push import arg_parser

        args = arg_parser().parse_args(args)
        self.run_id, self.folder, self.repo, self.private = rec.id, args.folder, args.repo, args.private
        self.log_path = rec.log_path
        self._read_events_from(args.events)

    def fields(self, s) -> dict:
        last = s.progress or {}
        payload = (s.end or {}).get("payload", {})
        return {
            "repo": self.repo,
            "private": self.private,
            "folder": self.folder,
            "done": last.get("done", 0),
            "total": last.get("total", 0),
            "files_done": last.get("i", 0),
            "files": last.get("n", 0),
            "url": s.result.get("url") if s.result is not None else None,
            "pushed": payload.get("pushed") or payload.get("files"),
            "log_path": str(self.log_path),
        }


def start_push(source: str, repo: str, *, private: bool = False) -> PushJob:
    folder = check_push(source, repo)
    argv = [sys.executable, "-m", MODULE, str(folder), "--repo", repo, "--events", "{run_dir}/events.jsonl"]
    argv += ["--private"] if private else []
    return PushJob(runs.submit_command(argv, name=f"push {folder.name} → {repo}", tags=[PUSH_TAG]))


def files_sent():
    """For ``CommandJob.follow``: the files sent so far, each time one more is."""
    shown = -1

    def lines(status: dict) -> list[str]:
        nonlocal shown
        if status["files_done"] == shown or not status["files"]:
            return []
        shown = status["files_done"]
        return [f"[push] {shown}/{status['files']} files, {status['done']}/{status['total']} bytes"]

    return lines


def cli(argv: list[str]) -> int:
    """``studio push``: 0 pushed, 1 failed, 2 bad input (offline, no token, no folder), 130 cancelled."""
    ap = argparse.ArgumentParser(prog="studio push", description="Upload a run's output or a folder to the hub.")
    ap.add_argument("source", metavar="RUN_ID|DIR", help="an export / merge / training run id, or a folder")
    ap.add_argument("--repo", required=True, help="owner/name on the hub (created if missing)")
    ap.add_argument("--private", action="store_true", help="create the repo private")
    args = ap.parse_args(argv)
    try:
        job = start_push(args.source, args.repo, private=args.private)
    except ExportError as exc:
        print(f"studio push: {exc}", file=sys.stderr)
        return 2
    status = job.follow(files_sent())
    if status["state"] == "finished":
        print(f"pushed to {status['url']}")
        return 0
    print(f"studio push: {status['state']}: {status['error']}", file=sys.stderr)
    return 130 if status["state"] == "cancelled" else 1
