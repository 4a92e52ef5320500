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
in the run folder Studio made, and allows only the folder the person at the shell chose, and the reward files
(``reward_files``) that person named outside the workspace's reward folder, where the page may not take code from
(engine.core.page_trust).
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
_GRANTED_CODE: list[Path] = []  # reward files this process may run for a run submitted from the shell


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


def granted_code() -> list[Path]:
    return list(_GRANTED_CODE)


def write_grant(
    run_dir: str | Path, output_dir: str | Path | None = None, *, reward_files: list[str | Path] = ()
) -> None:
    """Record in a run's folder what the person at the shell chose for it: ``output_dir`` (absolute), the
    ``reward_files`` it runs from outside the reward folder; added to what the grant already holds."""
    path = Path(run_dir) / GRANT
    data = _read(run_dir)
    if output_dir is not None:
        data["output_dir"] = str(Path(output_dir).resolve())
    if reward_files:
        known = [f for f in data.get("reward_files") or [] if isinstance(f, str)]
        data["reward_files"] = known + [
            str(Path(f).resolve()) for f in reward_files if str(Path(f).resolve()) not in known
        ]
    path.write_text(json.dumps(data), encoding="utf-8")


def _read(run_dir: str | Path) -> dict:
    try:
        data = json.loads((Path(run_dir) / GRANT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_grant(run_dir: str | Path) -> Path | None:
    out = _read(run_dir).get("output_dir")
    return Path(out) if isinstance(out, str) and Path(out).is_absolute() else None


def honour_grant(run_dir: str | Path) -> Path | None:
    """In a run's process: allow the folder its grant names (if any), returned, and the reward files it names."""
    out = read_grant(run_dir)
    if out is not None and out not in _GRANTED:
        _GRANTED.append(out)
    for f in _read(run_dir).get("reward_files") or []:
        if isinstance(f, str) and Path(f).is_absolute() and Path(f) not in _GRANTED_CODE:
            _GRANTED_CODE.append(Path(f))
    return out


def may_run_code(path: str | Path) -> bool:
    """Whether this process may run the reward file ``path`` whatever the page's rule says: it acts for the person at
    the shell, or that person's grant names the file."""
    return at_shell() or Path(path).resolve() in _GRANTED_CODE


def from_working_folder(given: str) -> str:
    """A relative path given at the shell that names something in the working folder, made absolute: the
    subprocesses of merges and exports run in the repository, not where the command was typed. Anything else (a run
    id, a hub id, an absolute path) is returned as it is."""
    path = Path(given).expanduser()
    return str(path.resolve()) if not path.is_absolute() and path.exists() else given
