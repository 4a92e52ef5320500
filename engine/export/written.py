"""What a merge or an export wrote in its output folder, so that ``--overwrite`` replaces only that.

Light: stdlib and the export catalog. Every merge and export publishes its folder with a marker (``MARKER``: when,
what kind, the files it wrote, relative). A later merge or export given ``--overwrite`` replaces an existing folder
only when that folder holds the marker and nothing the marker does not list: a folder Studio did not write (another
workspace, a user's notes) is refused naming what is in it, and so is a Studio folder a user added files to. The
command prints what the overwrite removes before it launches (``removal``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from engine.core.messages import Message
from engine.export.messages import message

MARKER = ".studio-written.json"
SHOWN = 5  # entries named in a refusal


def _entries(folder: Path) -> list[str]:
    """Every file and link under ``folder``, relative, links not followed."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        base = Path(root)
        for name in sorted(files) + sorted(d for d in dirs if (base / d).is_symlink()):
            found.append(str((base / name).relative_to(folder)))
    return found


def mark(folder: str | Path, kind: str) -> None:
    """Write the marker into a finished output folder (its temporary folder, before it is published)."""
    folder = Path(folder)
    files = [f for f in _entries(folder) if f != MARKER]
    record = {"written_by": "studio", "kind": kind, "at": time.time(), "files": files}
    (folder / MARKER).write_text(json.dumps(record, indent=1), encoding="utf-8")


def _listed(folder: Path) -> set[str] | None:
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = record.get("files") if isinstance(record, dict) else None
    return {str(f) for f in files} | {MARKER} if isinstance(files, list) else None


def _named(entries: list[str]) -> str:
    more = f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else ""
    return ", ".join(entries[:SHOWN]) + more


def overwrite_problem(out: str | Path) -> Message | None:
    """Why ``--overwrite`` may not replace the existing ``out`` (None: it may, or there is nothing there)."""
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return None
    if out.is_symlink() or not out.is_dir():
        return message("export.overwrite_not_folder", out=out)
    listed = _listed(out)
    present = _entries(out)
    if listed is None:
        if not present and not any(out.iterdir()):
            return None  # an empty folder: replacing it loses nothing
        what = _named(sorted({p.split(os.sep)[0] for p in present})) or "nothing"
        return message("export.overwrite_not_ours", out=out, what=what)
    added = [p for p in present if p not in listed]
    if added:
        return message("export.overwrite_added", out=out, what=_named(added), count=len(added))
    return None


def removal(out: str | Path) -> str | None:
    """The line a command prints before it overwrites ``out``: the files it removes (None: nothing there)."""
    out = Path(out)
    if not out.is_dir():
        return None
    files = [p for p in _entries(out) if p != MARKER]
    return str(message("export.overwrite_removes", out=out, count=len(files), what=_named(files) or "nothing"))
