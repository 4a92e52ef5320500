"""Push subprocess: ``python -m engine.export.push FOLDER --repo ID [--private] --events FILE``. Light: stdlib and
huggingface_hub (its real client; ``HF_ENDPOINT`` names another hub, e.g. the tests' local stand-in).

Started as a registry command run by engine.export.push_jobs, which has checked the folder, the repo id, the network
switch and the token first. Creates the repo (private or public; an existing one is reused) and uploads the folder one
file per commit, largest last, with a ``push_progress`` event (files and bytes done) after each; SIGTERM stops it
between files (what was committed stays on the hub, which the failure says). The token comes from ``HF_TOKEN`` in
the environment, which the scheduler passes in memory; it is never written to the events, the log or argv.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from engine.core import events as ev


class Cancelled(Exception):
    pass


def _on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Cancelled("cancelled (SIGTERM)")


def arg_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine.export.push")
    ap.add_argument("folder")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--private", action="store_true")
    ap.add_argument("--events", required=True)
    return ap


def files_to_push(folder: Path) -> list[Path]:
    found = [p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.parts[-1:])]
    return sorted(found, key=lambda p: p.stat().st_size)


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text


def main(argv: list[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    events, folder = Path(args.events), Path(args.folder)
    token = os.environ.get("HF_TOKEN") or None
    done_files: list[str] = []
    try:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        url = str(api.create_repo(args.repo, private=args.private, exist_ok=True))
        files = files_to_push(folder)
        total = sum(f.stat().st_size for f in files)
        done = 0
        ev.append_event(events, "push_progress", None, repo=args.repo, i=0, n=len(files), done=0, total=total)
        delay = float(os.environ.get("STUDIO_PUSH_FILE_DELAY", "0") or 0)  # tests use it to cancel mid-push
        for i, f in enumerate(files, start=1):
            name = f.relative_to(folder).as_posix()
            api.upload_file(
                path_or_fileobj=str(f), path_in_repo=name, repo_id=args.repo, commit_message=f"Studio: {name}"
            )
            done += f.stat().st_size
            done_files.append(name)
            ev.append_event(
                events, "push_progress", None, repo=args.repo, i=i, n=len(files), file=name, done=done, total=total
            )
            if delay:
                import time

                time.sleep(delay)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ev.append_event(events, "push_finished", None, repo=args.repo, url=url, files=done_files, bytes=total)
        print(f"pushed {len(done_files)} file(s) to {url}", flush=True)
        return 0
    except Cancelled as exc:
        ev.append_event(events, "push_failed", None, repo=args.repo, cause="cancelled", error=str(exc),
                        pushed=done_files)  # fmt: skip
        return 130
    except Exception as exc:  # noqa: BLE001 - the hub's answer, said whole (never the token)
        error = _scrub(f"{type(exc).__name__}: {exc}", token)
        ev.append_event(events, "push_failed", None, repo=args.repo, cause="hub", error=error, pushed=done_files)
        print(error, file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
