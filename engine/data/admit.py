"""Which files a dataset entry may have read: regular files inside the entry's own folder, of a bounded size.

An entry of ``dataset_info.json`` names a file or folder (``file_name``, ``script_url``) and a hub dataset a snapshot
in the Hugging Face cache. Before any byte of it is read (``engine.data.dataset_registry._where``, used by every
reader: the trainer, ``studio data check``, the page's checks and previews), ``entry_problem`` checks, after resolving
links:

- the file or folder lies inside the dataset folder, or inside the workspace's ``uploads/`` where the page stores
  the files it registers by absolute path (a hub snapshot: inside its repository's cache folder, whose
  ``snapshots/`` link into ``blobs/``): ``"../../"``, ``"/"`` or a link leading out are refused;
- every file that would be read is a regular file: a FIFO would block the reader until someone writes it, a link to
  ``/dev/zero`` would be read until memory runs out;
- each such file and all of them together hold at most ``max_file_bytes()`` (``STUDIO_MAX_DATASET_MB``, default
  4096 MiB), checked from ``stat`` before reading.

Light: stdlib and engine.core.workspace.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.data.messages import message

DEFAULT_MAX_DATASET_MB = 4096
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def max_file_bytes(env: dict[str, str] | None = None) -> int:
    """``STUDIO_MAX_DATASET_MB`` in bytes; raises ValueError naming the variable when it is not a positive number."""
    env = os.environ if env is None else env
    text = str(env.get("STUDIO_MAX_DATASET_MB") or DEFAULT_MAX_DATASET_MB)
    try:
        mb = float(text)
    except ValueError:
        mb = 0.0
    if not mb > 0:
        raise ValueError(message("data.max_dataset_mb", value=text))
    return int(mb * 2**20)


def inside(path: Path, root: Path | list[Path]) -> bool:
    """``path``, links resolved, is ``root`` (or one of the roots) or lies under it (roots resolved too)."""
    try:
        target = path.resolve()
        return any(target.is_relative_to(r.resolve()) for r in (root if isinstance(root, list) else [root]))
    except (OSError, RuntimeError):  # a link loop
        return False


def roots(dataset_dir: Path) -> list[Path]:
    """Where a local entry's files may be: the dataset folder, and the workspace's uploads (the page's copies)."""
    from engine.core import workspace

    return [Path(dataset_dir), workspace.uploads_dir()]


def hub_root(snapshot: Path) -> Path:
    """The repository's folder in the Hugging Face cache (``.../datasets--o--n``) holding ``snapshot``: a snapshot's
    files are links into its ``blobs/``."""
    parts = snapshot.parts
    if "snapshots" in parts:
        return Path(*parts[: len(parts) - 1 - parts[::-1].index("snapshots")])
    return snapshot


def outside_problem(name: str, key: str, value: str, path: Path, root: Path | list[Path]):
    """The message refusing an entry whose ``key`` leads out of ``root`` (the first root is named), or None."""
    if inside(path, root):
        return None
    folder = root[0] if isinstance(root, list) else root
    return message("data.entry_outside", name=name, key=key, value=value, folder=folder)


def files_problem(name: str, files: list[Path], root: Path | list[Path]):
    """The message refusing the first of ``files`` (those about to be read) that is outside ``root``, not a regular
    file, or too big (alone or with the others), or None when all may be read. Only ``stat``: nothing is opened."""
    limit = max_file_bytes()
    total = 0
    for f in files:
        if not inside(f, root):
            folder = root[0] if isinstance(root, list) else root
            return message("data.file_outside_entry", name=name, path=f, folder=folder)
        try:
            st = os.stat(f)
        except OSError as exc:
            return message("data.file_unreadable", name=name, path=f, error=exc.strerror or exc)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            return message("data.not_regular", name=name, path=f, kind=kind)
        total += st.st_size
        if st.st_size > limit or total > limit:
            return message(
                "data.file_too_big", name=name, path=f, size=f"{total / 2**20:.0f}", limit=f"{limit / 2**20:.0f}"
            )
    return None
