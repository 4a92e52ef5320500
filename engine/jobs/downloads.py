"""Downloads as registry runs, and ``studio download`` / ``studio models``. Light: stdlib, the registry,
engine.models.download / local; never torch.

A download is a command run of the registry (``submit_command``, tag ``download``) running the worker
``python -m engine.models.download`` (see that module): its own folder and ``events.jsonl`` (download_progress with
bytes, speed and ETA; download_finished / download_failed with a catalog message), the detached wrapper, stop
(SIGTERM: the worker keeps its partial files; downloading the same repo again resumes them), the queue (a CPU slot)
and the Runs tab, like a merge (``engine.export.merge_jobs``). ``DownloadJob(run_id)`` is rebuilt from the registry
row, so a reloaded page follows and cancels it. A training run downloads its own model first (``engine.runs.scheduler``
puts the worker in front of the trainer), so it needs no download run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.core import belongings
from engine.core.messages import Message
from engine.jobs.command_job import CommandJob, job_record, new_events, newest_jobs
from engine.models import local, ms_models
from engine.models.download import describe_event
from engine.models.hub_cache import DOWNLOAD_TAG, DownloadError, parse_target, worker_argv
from engine.models.messages import message
from engine.runs import owners
from engine.runs import registry as runs

WORKERS = ("engine.models.download", "engine.models.ms_download")  # the hub's, ModelScope's


def submit_download(
    name: str, *, revision: str | None = None, repo_type: str | None = None, modelscope: bool = False
) -> str:
    """Queue the download of a hub model or dataset as a registry run (tag ``download``); its run id.
    ``modelscope``: a ModelScope model, into ModelScope's cache (``engine.models.ms_download``)."""

    target = parse_target(name, revision, repo_type)
    if modelscope:
        if target.repo_type != "model":  # ModelScope datasets are the registry's (ms_hub_url), read by the run
            raise DownloadError(message("models.bad_id", name=name), "input")
        argv = ms_models.worker_argv(target.repo_id, target.revision, "{run_dir}/events.jsonl")
        return runs.submit_command(argv, name=f"download {target.label} (ModelScope)", tags=[DOWNLOAD_TAG])
    argv = worker_argv(target, "{run_dir}/events.jsonl")
    return runs.submit_command(argv, name=f"download {target.label}", tags=[DOWNLOAD_TAG])


class DownloadJob(CommandJob):
    """One download, read back from its registry run; ``poll()`` is cheap and safe to call from a UI timer.
    ``cancel()``: the worker keeps its partial files for a resume and exits."""

    what = "download"
    events_prefix = "download"

    def __init__(self, run_id: str):
        not_this = message("models.download_not_download", id=run_id)
        rec, rest = job_record(run_id, WORKERS, lambda why: DownloadError(why, "input"), not_this)
        self.run_id, self.run_dir, self.repo = rec.id, Path(rec.run_dir), rest[0]
        self._read_events_from(Path(rec.run_dir) / "events.jsonl")

    def fields(self, s) -> dict:
        return {"repo": self.repo, "progress": s.progress, "detail": s.detail, "result": s.result}


def list_downloads(limit: int = 20) -> list[DownloadJob]:
    return newest_jobs(DOWNLOAD_TAG, DownloadJob, DownloadError, limit)


def in_use(model: local.LocalModel) -> Message | None:
    """Why ``model`` must not be deleted now: a queued or running run trains on it."""
    path = str(Path(model.path).resolve())
    for rec in runs.list_runs():
        if not rec.active or rec.kind != "train":
            continue
        try:
            name = rec.load_spec().model.name_or_path
        except Exception:  # noqa: BLE001 - a spec that no longer parses uses nothing
            continue
        if name == model.name or name.split("@", 1)[0] == model.name or str(Path(name).resolve()) == path:
            return message("models.local_in_use", path=model.name, run=rec.id, status=rec.status)
    return None


def delete_local(name: str, source: str | None = None) -> Message:
    """Delete a local model (workspace or cache) unless an active run uses it; DownloadError otherwise. In team mode
    a member deletes only their own (engine.core.belongings): the operator's and admins' are shared read-only."""
    model = local.find(name, source)
    if model is None or owners.path_problem(model.path) is not None:  # team mode: another member's, as unknown
        raise DownloadError(message("models.local_unknown", name=name), "input")
    if not belongings.may_change(belongings.path_owner(model.path)):  # shared with the team read-only
        raise DownloadError(message("models.local_read_only", name=name), "input")
    busy = in_use(model)
    if busy is not None:
        raise DownloadError(busy, "input")
    said = local.delete(model)
    belongings.forget_path(model.path)
    return said


def share_local(name: str, names: list[str]) -> list[str]:
    """Share a member's model folder in the workspace read-only with the accounts ``names`` (``["*"]`` everyone,
    ``[]`` nobody again; engine.core.belongings.share_path); DownloadError naming why not. The caches' models are
    the machine's, everyone's already; another member's answers as unknown."""
    model = local.find(name, local.WORKSPACE)
    if model is None or owners.path_problem(model.path) is not None:
        raise DownloadError(message("models.local_unknown", name=name), "input")
    try:
        return belongings.share_path(model.path, names)
    except belongings.ShareError as exc:
        raise DownloadError(exc.args[0], "input") from None


# ----------------------------------------------------------------------------------------------- CLI
def download_and_follow(
    name: str, *, revision: str | None = None, repo_type: str | None = None, modelscope: bool = False
) -> dict:
    """Blocking download for a terminal: queue, print each event, return the final ``poll()``; Ctrl-C cancels."""
    job = DownloadJob(submit_download(name, revision=revision, repo_type=repo_type, modelscope=modelscope))
    return job.follow(new_events(describe_event, lambda e: e["type"].startswith("download_")), label="download")


def cli(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    if command == "models":
        return models_cli(rest)
    ap = argparse.ArgumentParser(
        prog="studio download",
        description="Download a hub model (org/name[@revision]) or dataset (datasets/org/name) into the Hugging Face "
        "cache as a run: progress, cancel with Ctrl-C, run it again to resume. HF_TOKEN is used for gated models.",
    )
    ap.add_argument("name", metavar="MODEL_OR_DATASET")
    ap.add_argument("--revision", default=None, help="branch, tag or commit (default main)")
    ap.add_argument("--dataset", action="store_true", help="a dataset repo (same as datasets/org/name)")
    ap.add_argument("--detach", action="store_true", help="queue the download and return at once")
    ap.add_argument(
        "--modelscope",
        action=argparse.BooleanOptionalAction,
        default=ms_models.use_modelscope(),
        help="a ModelScope model, into ModelScope's cache (MODELSCOPE_ENDPOINT, MODELSCOPE_CACHE); the default when "
        "USE_MODELSCOPE_HUB is set, as in LLaMA-Factory",
    )
    args = ap.parse_args(rest)
    repo_type = "dataset" if args.dataset else None
    ms = args.modelscope and not args.dataset and not args.name.startswith("datasets/")
    from engine.models import reach

    # which hub, before anything: a mirror (HF_ENDPOINT), the default hub, or ModelScope
    print(f"[download] {ms_models.where() if ms else reach.where()}", flush=True)
    try:
        if args.detach:
            run_id = submit_download(args.name, revision=args.revision, repo_type=repo_type, modelscope=ms)
            print(f"download queued as run {run_id} (`studio runs show {run_id}`)")
            return 0
        status = download_and_follow(args.name, revision=args.revision, repo_type=repo_type, modelscope=ms)
    except DownloadError as exc:
        print(f"studio download: {exc}", file=sys.stderr)
        return 2
    if status["state"] == "finished":
        return 0
    print(f"studio download: {status['state']}: {status['error']}", file=sys.stderr)
    return 130 if status["state"] == "cancelled" else 1


def models_cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="studio models", description="Local models: the workspace's and the cache's.")
    sub = ap.add_subparsers(dest="action")
    sub.add_parser("list", help="list local models with their sizes (the default)")
    rm = sub.add_parser("delete", help="delete a local model (not while a run uses it)")
    rm.add_argument("name", help="as listed: models/<folder>, org/name or datasets/org/name")
    rm.add_argument("--source", choices=[local.WORKSPACE, local.CACHE, local.MODELSCOPE], default=None)
    sh = sub.add_parser("share", help="team mode: share a member's model folder in the workspace read-only")
    sh.add_argument("name", help="as listed: models/<folder>")
    sh.add_argument("readers", nargs="+", metavar="ACCOUNT", help="accounts, * for everyone, none for nobody again")
    args = ap.parse_args(argv)
    if args.action == "share":
        try:
            now = share_local(args.name, [] if args.readers == ["none"] else args.readers)
        except DownloadError as exc:
            print(f"studio models share: {exc}", file=sys.stderr)
            return 1
        print(f"{args.name}: shared read-only with {', '.join(now) if now else 'nobody'}")
        return 0
    if args.action == "delete":
        try:
            print(delete_local(args.name, args.source))
        except DownloadError as exc:
            print(f"studio models: {exc}", file=sys.stderr)
            return 1
        return 0
    from engine.core.units import file_size

    rows = local.list_local()
    if not rows:
        print("no local models")
        return 0
    width = max(len(m.name) for m in rows)
    for m in rows:
        state = "" if m.complete else f"  (incomplete{', ' + file_size(m.partial) + ' partial' if m.partial else ''})"
        print(f"{m.name.ljust(width)}  {m.source:10}  {file_size(m.size):>9}  {m.path}{state}")
    return 0
