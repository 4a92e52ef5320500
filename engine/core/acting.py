"""Who a command acts for, and the folders outside the workspace a run may write because of it.

Light: stdlib only (engine.core.folders imports it).

The ``studio`` command line acts for the person at the shell: it may write where that person can (a LLaMA-Factory
user's ``output_dir: saves/...`` under the folder they run in, LF's ``export_dir``), still never in a folder another
run, the workspace or a model owns, nor in a system folder (engine.core.folders decides both). The page, which
remote users reach, stays bound to the workspace and ``STUDIO_OUTPUT_ROOTS``.

``engine.cli`` runs each command but ``webui`` inside ``shell()``. A run submitted from the shell whose output folder
lies outside what the page may write gets a grant in its run folder (``shell_grant.json``, naming that one folder);
the trainer honours it (``honour_grant``) before it checks its spec again, so the run can write its folder whoever
launches it (the page's scheduler may start a run queued from the shell). The grant is written by ``submit`` only,
in the run folder Studio made, and allows only the folder the person at the shell chose.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GRANT = "shell_grant.json"

_SHELL: contextvars.ContextVar[bool] = contextvars.ContextVar("studio_acts_for_shell", default=False)
_GRANTED: list[Path] = []  # folders this process may write for a run submitted from the shell (the trainer's)


@contextmanager
def shell() -> Iterator[None]:
    """Within: the commands act for the person at the shell (``at_shell`` is True)."""
    token = _SHELL.set(True)
    try:
        yield
    finally:
        _SHELL.reset(token)


def at_shell() -> bool:
    return _SHELL.get()


def granted() -> list[Path]:
    return list(_GRANTED)


def write_grant(run_dir: str | Path, output_dir: str | Path) -> None:
    """Record in a run's folder that the person at the shell chose ``output_dir`` (absolute) for it."""
    path = Path(run_dir) / GRANT
    path.write_text(json.dumps({"output_dir": str(Path(output_dir).resolve())}), encoding="utf-8")


def read_grant(run_dir: str | Path) -> Path | None:
    try:
        data = json.loads((Path(run_dir) / GRANT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    out = data.get("output_dir") if isinstance(data, dict) else None
    return Path(out) if isinstance(out, str) and Path(out).is_absolute() else None


def honour_grant(run_dir: str | Path) -> Path | None:
    """In a run's process: allow the folder its grant names (if any), returned."""
    out = read_grant(run_dir)
    if out is not None and out not in _GRANTED:
        _GRANTED.append(out)
    return out


def from_working_folder(given: str) -> str:
    """A relative path given at the shell that names something in the working folder, made absolute: the
    subprocesses of merges and exports run in the repository, not where the command was typed. Anything else (a run
    id, a hub id, an absolute path) is returned as it is."""
    path = Path(given).expanduser()
    return str(path.resolve()) if not path.is_absolute() and path.exists() else given
