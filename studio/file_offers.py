"""Files of the workspace a person takes home from the page: an evaluation's ``report.html``, an export's GGUF, its
Modelfile, a quantized folder's files.

Gradio serves only the files it was handed from its temp folder, behind the login (studio.guard); the workspace
itself is not served. ``offer`` puts a hard link to a workspace file there (a copy where the temp folder is on
another filesystem), under a key of its own (the job's id), and returns that path for a ``gr.File`` /
``gr.DownloadButton``. A path outside the workspace, a link leading out of it, anything but a regular file, and (in
team mode) a file in another member's run or job folder (``engine.runs.owners.path_problem``) is never offered.
Light: stdlib, engine.core.workspace and engine.runs.owners.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from engine.core import workspace
from engine.runs import owners

FOLDER = "studio-downloads"


def inside_workspace(path: str | Path) -> Path | None:
    """The regular file ``path`` resolves to (links followed) when it lies inside the workspace and the page's user
    may read it, else None."""
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    root = workspace.home().resolve()
    if not (real.is_relative_to(root) and real.is_file()) or owners.path_problem(real) is not None:
        return None
    return real


def offer(path: str | Path, key: str) -> str | None:
    """A path gradio may serve holding the workspace file ``path`` (None when it may not be offered). ``key`` (a run
    id) keeps one job's files apart from another's."""
    source = inside_workspace(path)
    if source is None:
        return None
    slot = Path(tempfile.gettempdir()) / FOLDER / re.sub(r"[^\w.-]", "_", key)
    slot.mkdir(parents=True, exist_ok=True)
    target = slot / source.name
    if target.exists() and os.path.samefile(target, source):
        return str(target)
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another filesystem (or links refused): a copy
        shutil.copyfile(source, target)
    return str(target)


def offer_all(folder: str | Path, names: list[str], key: str) -> list[str]:
    """``offer`` for each of ``names`` in ``folder`` (those that may be offered, in order; Studio's own hidden
    records, such as ``.studio-written.json``, are not a person's to take)."""
    found = [offer(Path(folder) / name, key) for name in names if name and "/" not in name and name[0] != "."]
    return [p for p in found if p]
