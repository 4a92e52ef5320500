"""The download of a ModelScope model into ModelScope's cache, as a registry run like ``engine.models.download`` (the
Hugging Face one): ``python -m engine.models.ms_download REPO [--revision R] --events FILE [--then -- ARGV...]``.

1. says which ModelScope it asks (``MODELSCOPE_ENDPOINT``) and, when nothing answers there (asked once, a short
   timeout), fails at once in one line naming the model;
2. lists the repository's files with their sizes (``HubApi.list_repo_files``) and checks the cache's free space;
3. downloads with the real client (``modelscope.snapshot_download``: its cache layout, checksums and resume), its
   progress callback feeding the same ``download_progress`` events (bytes done / total, speed, ETA) as a hub download,
   then ``download_finished`` or ``download_failed`` with a catalog message;
4. with ``--then``, replaces itself with the training run's trainer (``exec``), which loads the snapshot folder
   (``engine.trainer.model.model_location``), so the run keeps one process, stop and status.

Light: stdlib; the ``modelscope`` client is imported inside the functions (it never loads torch).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from engine.core.messages import to_json
from engine.core.units import file_size
from engine.models import ms_models
from engine.models.download import Cancelled, Progress, _check_space, _raise_cancelled, _Reporter
from engine.models.hub_cache import DownloadError, Target
from engine.models.messages import message
from engine.models.worker_end import failed, finished


def _target(repo_id: str, revision: str | None) -> Target:
    rev = ms_models.revision_of(revision)
    return Target(repo_id, None if rev == ms_models.DEFAULT_REVISION else rev)


def repo_files(repo_id: str, revision: str | None) -> list[tuple[str, int]]:
    """(path, size) of the model repository's files, from ModelScope; DownloadError naming the model otherwise."""
    problem = ms_models.unanswered(repo_id, revision)
    if problem is not None:
        raise DownloadError(problem, "network" if problem.key == "models.ms_unreachable" else "input")
    from modelscope_hub.api import HubApi

    try:
        files = HubApi(endpoint=ms_models.endpoint()).list_repo_files(
            repo_id, "model", revision=ms_models.revision_of(revision)
        )
    except Exception as exc:  # noqa: BLE001 - the client's errors become one line
        msg = ms_models.client_problem(exc, repo_id, revision)
        raise DownloadError(msg, "not_found" if msg.key == "models.ms_not_found" else "hub") from None
    if not files:
        raise DownloadError(
            message("models.ms_not_found", name=ms_models.label(repo_id, revision), url=ms_models.endpoint()),
            "not_found",
        )
    return [(f.path, int(f.size or 0)) for f in files]


def download(repo_id: str, revision: str | None = None, *, events_path: Path | None = None, echo: bool = False):
    """Download the model into ModelScope's cache (files already there are kept); the finished payload, or
    DownloadError / Cancelled. Writes download_progress events while it runs (not the terminal ones)."""
    target = _target(repo_id, revision)
    url = ms_models.endpoint()
    print(f"[download] {message('models.ms_download_listing', name=target.label, url=url)}", flush=True)
    files = repo_files(repo_id, revision)
    sizes = dict(files)
    before = ms_models.cached_folder(repo_id, revision)
    present = {p for p, size in files if before is not None and _has(before / p, size)}
    prog = Progress(total=sum(sizes.values()), n=len(files))
    prog.done = sum(sizes[p] for p in present)
    missing = prog.total - prog.done
    if missing:
        _check_space(target, missing, ms_models.cache_root())
    reporter = _Reporter(target, prog, events_path, echo)
    reporter.report()
    from modelscope.hub.callback import ProgressCallback
    from modelscope.hub.snapshot_download import snapshot_download

    class _Callback(ProgressCallback):  # one per file, called from the client's download threads
        def __init__(self, filename: str, file_size: int):
            super().__init__(filename, file_size)
            self.counted = filename in present
            with prog.lock:
                prog.i, prog.file = min(prog.i + 1, prog.n), filename

        def update(self, size: int) -> None:
            if not self.counted:
                with prog.lock:
                    prog.done = min(prog.total, prog.done + size)

    reporter.start()
    try:
        folder = Path(
            snapshot_download(
                repo_id=repo_id,
                revision=ms_models.revision_of(revision),
                endpoint=url,
                cache_dir=ms_models.cache_root(),
                progress_callbacks=[_Callback],
            )
        )
    except Cancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - a file that stopped coming, a checksum, ...
        raise DownloadError(ms_models.client_problem(exc, repo_id, revision), "hub") from None
    finally:
        reporter.stop.set()
        reporter.join(timeout=5)
    with prog.lock:
        prog.done = prog.total
    last = reporter.report()
    summary = (
        message(
            "models.download_finished", name=target.label, files=len(files), size=file_size(prog.total), where=folder
        )
        if missing
        else message("models.ms_download_nothing", name=target.label, where=folder)
    )
    return {
        "repo": target.label,
        "hub": ms_models.HUB,
        "where": str(folder),
        "files": len(files),
        "bytes": prog.total,
        "fetched": len(files) - len(present),
        "speed": last["speed"],
        "summary": str(summary),
        "summary_msg": to_json(summary),
    }


def _has(path: Path, size: int) -> bool:
    try:
        return path.is_file() and path.stat().st_size == size
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    """The worker. 0 downloaded (or exec'd into ``--then``), 1 failed, 2 bad input, 130 / 143 cancelled."""
    argv = list(sys.argv[1:] if argv is None else argv)
    then: list[str] = []
    if "--then" in argv:  # everything after it is the command to become, options included
        at = argv.index("--then")
        argv, then = argv[:at], argv[at + 1 :]
        then = then[1:] if then[:1] == ["--"] else then
    ap = argparse.ArgumentParser(prog="python -m engine.models.ms_download")
    ap.add_argument("repo")
    ap.add_argument("--revision", default=None)
    ap.add_argument("--events", default=None, help="the run's events.jsonl")
    ap.add_argument("--echo", action="store_true", help="print the progress too")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_cancelled)
    signal.signal(signal.SIGINT, _raise_cancelled)
    events_path = Path(args.events) if args.events else None
    label = ms_models.label(args.repo, args.revision)
    try:
        result = download(args.repo, args.revision, events_path=events_path, echo=args.echo or events_path is None)
    except Cancelled as exc:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        folder = ms_models.cached_folder(args.repo, args.revision)
        kept = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder is not None else 0
        msg = message("models.download_cancelled", name=label, done=file_size(kept))
        failed(events_path, "cancelled", msg, label, terminal=False)
        return 130 if str(exc) == "SIGINT" else 143
    except DownloadError as exc:
        failed(events_path, exc.cause, exc.args[0], label, terminal=bool(then))
        return 2 if exc.cause == "input" else 1
    return finished(events_path, result, then)


if __name__ == "__main__":
    sys.exit(main())
