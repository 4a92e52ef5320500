"""Downloads of hub models and datasets into the Hugging Face cache, as registry runs with progress, cancel and
resume. Light: stdlib; ``huggingface_hub`` is imported inside the functions that use it (it never loads torch).

The worker, ``python -m engine.models.download REPO [--revision R] [--repo-type model|dataset] --events FILE
[--then -- ARGV...]``:

1. asks the hub for the repo's files with their sizes and checksums (``HfApi.repo_info(files_metadata=True)``);
2. checks the free disk space of the cache folder against what is still missing, before any byte is fetched;
3. fetches each missing file with the client's ``http_get`` into ``blobs/<etag>.incomplete`` in the cache, resuming
   from what an earlier, cancelled or broken, attempt left there (``Range: bytes=N-``). ``hf_hub_download`` itself
   cannot resume across processes (it writes to a per-process temp file and removes it on failure);
4. checks each file against the hub's sha256 (LFS files) or git blob id before it becomes a blob, then links it into
   ``snapshots/<commit>/`` and writes ``refs/<revision>``: the cache's own layout, so ``from_pretrained``,
   ``try_to_load_from_cache`` and ``scan_cache_dir`` find it like any other download;
5. appends ``download_progress`` events (bytes done / total, speed, ETA) to FILE about every second, then
   ``download_finished`` or ``download_failed`` with a catalog message (``engine.models.messages``): gated (with or
   without a token), not on the hub, unreachable, offline, disk full, checksum mismatch, a server that stopped sending.

``HF_TOKEN`` is read from the environment, which the scheduler passes in memory: Studio never writes it anywhere.

What a target is, where the cache keeps it, whether a model is complete there, and the argv that starts this worker
(alone, or in front of a training run's trainer) are ``engine.models.hub_cache``'s.

A download is a command run of the registry (``engine.jobs.downloads``, tag ``download``): it gets its folder, the
detached wrapper, stop (SIGTERM: the worker keeps its ``.incomplete`` files and exits; a new download of the same repo
resumes them), the queue and the Runs tab, like a merge (``engine.export.merge_jobs``). A training run whose model is a
hub id not complete in the cache downloads it first, in the same run: the scheduler prefixes the trainer's argv with
this worker and ``--then --`` (``download_first``), and the worker replaces itself with the trainer (``exec``) when the
files are there, so the run's process, stop and status stay one. ``studio download`` does the same from a terminal.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from engine.core import events as ev
from engine.core.messages import to_json
from engine.core.units import file_size
from engine.models.hub_cache import (
    HUB_TIMEOUT_S,
    DownloadError,
    Target,
    parse_target,
    storage_folder,
)
from engine.models.messages import message
from engine.models.worker_end import failed, finished

DISK_RESERVE = 64 << 20  # left free after a download, for the cache's own bookkeeping and the run's logs


def interval_s() -> float:
    try:
        return max(0.05, float(os.environ.get("STUDIO_DOWNLOAD_INTERVAL", "1.0")))
    except ValueError:
        return 1.0


class Cancelled(BaseException):
    """Raised in the worker's main thread by SIGTERM / SIGINT: unwinds the transfer, keeps the partial file."""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


# ----------------------------------------------------------------------------------------------- the worker
@dataclass
class HubFile:
    path: str
    size: int
    sha256: str | None = None  # LFS files
    blob_id: str | None = None  # git object id (sha1 of "blob <len>\0" + content)


@dataclass
class Progress:
    total: int = 0
    done: int = 0  # bytes of finished files (and those already in the cache)
    file: str = ""
    i: int = 0
    n: int = 0
    partial: Path | None = None  # the file being written: its size counts as done too
    window: deque = field(default_factory=lambda: deque(maxlen=16))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now_done(self) -> int:
        with self.lock:  # the lock _fetch finishes a file under: never a reading between its move and its count
            try:
                return self.done + (self.partial.stat().st_size if self.partial is not None else 0)
            except OSError:
                return self.done


def _hub_problem(exc: BaseException, target: Target, token: str | None, file: str = "") -> DownloadError:
    """The client's exception as a clear message: gated, not found, unreachable, stalled, or the hub's own words."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    name = target.label
    name_kind = type(exc).__name__
    if isinstance(exc, GatedRepoError):
        if token:
            return DownloadError(message("models.download_gated_token", name=name), "gated")
        return DownloadError(message("models.gated", name=name), "gated")
    if isinstance(exc, RepositoryNotFoundError):
        url = f"{constants.ENDPOINT}/{target.repo_id}"
        return DownloadError(message("models.not_on_hub", name=name, url=url), "not_found")
    if isinstance(exc, RevisionNotFoundError):
        return DownloadError(message("models.no_revision", name=name, revision=target.revision or "main"), "not_found")
    if isinstance(exc, OfflineModeIsEnabled):
        return DownloadError(message(_offline_key(target), name=name), "offline")
    if isinstance(exc, EntryNotFoundError):
        return DownloadError(message("models.hub_error", name=name, error=_first_line(exc)), "not_found")
    if "Timeout" in name_kind:
        timeout = constants.HF_HUB_DOWNLOAD_TIMEOUT if file else HUB_TIMEOUT_S
        if not file:
            return DownloadError(message("models.download_unreachable", name=name, url=constants.ENDPOINT), "network")
        return DownloadError(message("models.download_stalled", name=name, file=file, timeout=timeout), "stalled")
    if isinstance(exc, HfHubHTTPError):
        return DownloadError(message("models.hub_error", name=name, error=_first_line(exc)), "hub")
    if "Connect" in name_kind or "Network" in name_kind or isinstance(exc, ConnectionError):
        return DownloadError(message("models.download_unreachable", name=name, url=constants.ENDPOINT), "network")
    if file and "Consistency check failed" in str(exc):
        return DownloadError(
            message("models.download_incomplete", name=name, file=file, error=_first_line(exc)), "network"
        )
    return DownloadError(message("models.hub_error", name=name, error=_first_line(exc)), "hub")


def _offline_key(target: Target) -> str:
    """The offline message speaks of what is downloaded: a model, or a dataset (``download --dataset``)."""
    return "models.download_offline_dataset" if target.repo_type == "dataset" else "models.download_offline"


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def hub_files(target: Target, token: str | None) -> tuple[str, list[HubFile]]:
    """(commit, files with sizes and checksums) from the hub."""
    from huggingface_hub import HfApi, constants

    if constants.HF_HUB_OFFLINE:
        raise DownloadError(message(_offline_key(target), name=target.label), "offline")
    try:
        info = HfApi().repo_info(
            target.repo_id,
            revision=target.revision,
            repo_type=target.repo_type,
            files_metadata=True,
            timeout=HUB_TIMEOUT_S,
            token=token,
        )
    except Exception as exc:  # noqa: BLE001 - every client error becomes a message
        raise _hub_problem(exc, target, token) from None
    files = [
        HubFile(s.rfilename, int(s.size or 0), s.lfs.sha256 if s.lfs else None, s.blob_id)
        for s in (info.siblings or [])
    ]
    return info.sha or target.revision or "main", files


def _check_space(target: Target, need: int, storage: Path) -> None:
    probe = storage
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need + DISK_RESERVE > free:
        raise DownloadError(
            message(
                "models.download_no_space", name=target.label, need=file_size(need), free=file_size(free), path=probe
            ),
            "disk",
        )


def _pointer(storage: Path, commit: str, path: str) -> Path:
    return storage / "snapshots" / commit / path


def _in_snapshot(storage: Path, commit: str, f: HubFile) -> bool:
    p = _pointer(storage, commit, f.path)
    try:
        return p.is_file() and (not f.size or p.stat().st_size == f.size)
    except OSError:
        return False


def _verify(path: Path, f: HubFile, target: Target) -> None:
    """The file's sha256 (LFS) or git blob id against the hub's listing; DownloadError on a mismatch."""
    if f.sha256:
        algo, expected, h = "sha256", f.sha256, hashlib.sha256()
    elif f.blob_id and len(f.blob_id) == 40:
        algo, expected, h = "git-sha1", f.blob_id, hashlib.sha1()
        h.update(b"blob %d\0" % path.stat().st_size)
    else:
        return
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    got = h.hexdigest()
    if got != expected:
        path.unlink(missing_ok=True)
        raise DownloadError(
            message(
                "models.download_checksum",
                name=target.label,
                file=f.path,
                algo=algo,
                got=got[:12],
                expected=expected[:12],
            ),
            "checksum",
        )


def _link(storage: Path, commit: str, path: str, blob: Path) -> None:
    pointer = _pointer(storage, commit, path)
    pointer.parent.mkdir(parents=True, exist_ok=True)
    tmp = pointer.with_name(pointer.name + ".studio-link")
    tmp.unlink(missing_ok=True)
    try:
        os.symlink(os.path.relpath(blob, pointer.parent), tmp)
    except OSError:  # no symlinks here: a copy, as huggingface_hub does
        shutil.copyfile(blob, tmp)
    os.replace(tmp, pointer)


def _fetch(target: Target, storage: Path, commit: str, f: HubFile, token: str | None, prog: Progress) -> int:
    """One file into the cache, resuming its ``.incomplete``; returns its size."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    try:
        url = hf_hub_url(target.repo_id, f.path, repo_type=target.repo_type, revision=commit)
        meta = get_hf_file_metadata(url, token=token, timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001
        raise _hub_problem(exc, target, token) from None
    etag = meta.etag or f.sha256 or f.blob_id or hashlib.sha256(f.path.encode()).hexdigest()
    size = meta.size if meta.size is not None else f.size
    blobs = storage / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    blob = blobs / etag
    fetched = not (blob.is_file() and blob.stat().st_size == size)
    if fetched:
        partial = blobs / f"{etag}.incomplete"
        if partial.exists() and partial.stat().st_size > size:
            partial.unlink()  # not a prefix of this file
        with prog.lock:
            prog.partial = partial
        try:
            with open(partial, "ab") as fh:
                resume = fh.tell()
                if resume < size:
                    try:
                        http_get(
                            meta.location,
                            fh,
                            resume_size=resume,
                            headers=build_hf_headers(token=token),
                            expected_size=size,
                            displayed_filename=f.path,
                        )
                    except Cancelled:
                        raise
                    except Exception as exc:  # noqa: BLE001
                        raise _hub_problem(exc, target, token, file=f.path) from None
            _verify(partial, f, target)
        except BaseException:
            prog.partial = None  # one assignment: the reader sees the file or nothing
            raise
    with prog.lock:  # moved into place and counted in one step: Progress.now_done never reads between the two
        if fetched:
            os.replace(partial, blob)
        prog.partial, prog.done = None, prog.done + f.size
    _link(storage, commit, f.path, blob)
    return size


def _write_ref(storage: Path, target: Target, commit: str) -> None:
    rev = target.revision or "main"
    if rev == commit:
        return
    ref = storage / "refs" / rev
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(ref.name + ".tmp")
    tmp.write_text(commit, encoding="utf-8")
    os.replace(tmp, ref)


class _Reporter(threading.Thread):
    """Appends a download_progress event every ``interval_s()`` while the transfer runs."""

    def __init__(self, target: Target, prog: Progress, events_path: Path | None, echo: bool):
        super().__init__(name="download-progress", daemon=True)
        self.target, self.prog, self.events_path, self.echo = target, prog, events_path, echo
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(interval_s()):
            self.report()

    def report(self) -> dict:
        prog = self.prog
        done, now = prog.now_done(), time.time()
        prog.window.append((now, done))
        t0, d0 = prog.window[0]
        speed = (done - d0) / (now - t0) if now > t0 else 0.0
        left = max(0, prog.total - done)
        eta = left / speed if speed > 0 else (0.0 if left == 0 else None)
        frac = done / prog.total if prog.total else 1.0
        detail = message(
            "models.download_progress",
            name=self.target.label,
            done=file_size(done),
            total=file_size(prog.total),
            percent=f"{frac * 100:.0f}",
            speed=file_size(speed),
            eta=_duration(eta),
        )
        payload = dict(
            repo=self.target.label,
            file=prog.file,
            i=prog.i,
            n=prog.n,
            done=done,
            total=prog.total,
            speed=round(speed, 1),
            eta_seconds=None if eta is None else round(eta, 1),
            progress=round(frac, 4),
            detail=str(detail),
            detail_msg=to_json(detail),
        )
        if self.events_path is not None:
            ev.append_event(self.events_path, "download_progress", None, **payload)
        if self.echo:
            print(f"[download] {detail} ({prog.file} {prog.i}/{prog.n})", flush=True)
        return payload


def download(target: Target, *, events_path: str | Path | None = None, echo: bool = False) -> dict:
    """Download ``target`` into the Hugging Face cache (see the module doc); the finished payload, or DownloadError /
    Cancelled. Writes download_progress events to ``events_path`` while it runs (not the terminal ones)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # the events are the progress; tqdm bars would only fill the log
    # The client writes what it receives in chunks of this size (10 MiB by default): smaller ones let the progress
    # (the .incomplete file's size) and a cancel's kept bytes follow the transfer closely.
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, 1 << 20)
    token = os.environ.get("HF_TOKEN") or None  # None: the client's own login, if any
    events_path = Path(events_path) if events_path else None
    prog = Progress()
    reporter = _Reporter(target, prog, events_path, echo)
    # always (the run's log too): which hub, a mirror named by HF_ENDPOINT or the default one
    print(f"[download] {message('models.download_listing', name=target.label, url=constants.ENDPOINT)}", flush=True)
    commit, files = hub_files(target, token)
    storage = storage_folder(target)
    missing = [f for f in files if not _in_snapshot(storage, commit, f)]
    prog.total = sum(f.size for f in files)
    prog.done = prog.total - sum(f.size for f in missing)
    prog.n = len(files)
    if missing:
        _check_space(target, sum(f.size for f in missing), storage)
    reporter.report()
    reporter.start()
    try:
        for i, f in enumerate(files, 1):
            prog.i, prog.file = i, f.path
            if f not in missing:
                continue
            _fetch(target, storage, commit, f, token, prog)  # counts the file in prog.done
        _write_ref(storage, target, commit)
    finally:
        reporter.stop.set()
        reporter.join(timeout=5)
    last = reporter.report()
    snap = storage / "snapshots" / commit
    summary = (
        message(
            "models.download_finished", name=target.label, files=len(files), size=file_size(prog.total), where=snap
        )
        if missing
        else message("models.download_nothing", name=target.label, where=snap)
    )
    return {
        "repo": target.label,
        "where": str(snap),
        "commit": commit,
        "files": len(files),
        "bytes": prog.total,
        "fetched": len(missing),
        "speed": last["speed"],
        "summary": str(summary),
        "summary_msg": to_json(summary),
    }


def _raise_cancelled(signum, _frame) -> None:
    raise Cancelled(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """The worker. 0 downloaded (or exec'd into ``--then``), 1 failed, 2 bad input, 130 / 143 cancelled."""
    argv = list(sys.argv[1:] if argv is None else argv)
    then: list[str] = []
    if "--then" in argv:  # everything after it is the command to become, options included
        at = argv.index("--then")
        argv, then = argv[:at], argv[at + 1 :]
        then = then[1:] if then[:1] == ["--"] else then
    ap = argparse.ArgumentParser(
        prog="python -m engine.models.download", epilog="--then [--] ARGV...: run ARGV (exec) once downloaded"
    )
    ap.add_argument("repo")
    ap.add_argument("--revision", default=None)
    ap.add_argument("--repo-type", choices=["model", "dataset"], default=None)
    ap.add_argument("--events", default=None, help="the run's events.jsonl")
    ap.add_argument("--echo", action="store_true", help="print the progress too")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_cancelled)
    signal.signal(signal.SIGINT, _raise_cancelled)
    events_path = Path(args.events) if args.events else None
    target: Target | None = None
    try:
        target = parse_target(args.repo, args.revision, args.repo_type)
        result = download(target, events_path=events_path, echo=args.echo or events_path is None)
    except Cancelled as exc:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        label = target.label if target else args.repo
        kept = _partial_bytes(target) if target else 0
        msg = message("models.download_cancelled", name=label, done=file_size(kept))
        failed(events_path, "cancelled", msg, label, terminal=False)
        return 130 if str(exc) == "SIGINT" else 143
    except DownloadError as exc:
        msg = exc.args[0]
        failed(events_path, exc.cause, msg, target.label if target else args.repo, terminal=bool(then))
        return 2 if exc.cause == "input" else 1
    return finished(events_path, result, then)


def _partial_bytes(target: Target) -> int:
    try:
        return sum(p.stat().st_size for p in (storage_folder(target) / "blobs").glob("*.incomplete"))
    except OSError:
        return 0


def describe_event(event: dict) -> str:
    """One line for a terminal (``studio download``, ``studio train``)."""
    p = event.get("payload", {})
    kind = event.get("type")
    if kind == "download_progress":
        return f"[download] {p.get('detail')} ({p.get('file')} {p.get('i')}/{p.get('n')})"
    if kind == "download_finished":
        return f"[download] {p.get('summary')}"
    if kind == "download_failed":
        return f"[download] {p.get('cause')}: {p.get('error')}"
    return f"[download] {kind}: {p}"


if __name__ == "__main__":
    sys.exit(main())
