"""How a download worker ends, the Hugging Face one (``engine.models.download``) and ModelScope's
(``engine.models.ms_download``) alike: its terminal event (``download_finished``, or ``download_failed`` and, as
the first phase of a training run, the run's ``failed``) and, once downloaded, ``exec`` into the ``--then`` command.

Light: stdlib and engine.core.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from engine.core import events as ev
from engine.core.messages import Message, to_json


def failed(events_path: Path | None, cause: str, msg: Message, label: str, *, terminal: bool) -> None:
    print(f"[download] {msg}", file=sys.stderr, flush=True)
    if events_path is None:
        return
    error = {"error": str(msg), "error_msg": to_json(msg)}
    ev.append_event(events_path, "download_failed", None, repo=label, cause=cause, **error)
    if terminal:  # the first phase of a training run: the run failed, and says why
        ev.append_event(events_path, "failed", None, cause="download", **error)


def finished(events_path: Path | None, result: dict, then: list[str]) -> int:
    """The download_finished event and its summary; then the run's process becomes its trainer (same pid, group,
    marker) when ``then`` names one, else 0."""
    if events_path is not None:
        ev.append_event(events_path, "download_finished", None, **result)
    print(f"[download] {result['summary']}", flush=True)
    if then:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execvpe(then[0], then, os.environ)
    return 0
