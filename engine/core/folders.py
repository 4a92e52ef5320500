"""Where runs, merges and exports may write, and who owns a folder: one rule for the Train form, the CLI and the
engine. Light: stdlib only.

An output folder (``output.output_dir`` of a spec, the target of ``studio merge`` / the Export tab) must be

* inside the workspace (``$STUDIO_HOME``), or strictly inside a root the user allowed explicitly with
  ``STUDIO_OUTPUT_ROOTS`` (folders separated by ``os.pathsep``; unset by default). A root that is a system folder
  (``/etc``, ``/usr``, ``/var``, ... or anything inside one), ``/`` or the home folder itself is never allowed;
* owned by nobody else. The workspace owns its own folders: the workspace itself, ``data/`` (the datasets),
  ``models/`` and each base model in it, ``runs/`` and each run's folder in it, ``exports/``, ``uploads/``,
  ``presets/``, ``cache/`` (tokenized datasets) and the registry. Callers add the owners they know: the spec's base
  model and dataset folder (``engine.spec.rules``), the runs of the registry and their output folders
  (``engine.runs.registry``). A new run's output folder is moreover never in ``exports/`` nor an existing folder
  with files (``new_run_output_problem``).

A folder is taken from its owner when it *is* the owner's folder, lies *inside* one that is owned whole (a run's
folder, the dataset folder, a model), or *holds* an owner (writing or deleting it would take the owner with it).
The command line acts for the person at the shell (engine.core.acting): it may write outside the workspace and the
allowed roots, never in a system folder, and the owners above still apply.
Relative paths are taken from the workspace; ``~`` is expanded; links are followed. ``engine.spec.rules`` (the form,
``studio validate`` / ``train``), ``engine.runs.registry`` (submit, delete), ``engine.export.checks`` (merge and
export targets) and the Export tab all ask ``output_problem`` / ``owner_of``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from engine.core import acting, workspace
from engine.core.messages import Message, message

ENV_ROOTS = "STUDIO_OUTPUT_ROOTS"
# Never an output root, nor anything inside them ("/" and the home folder: never as roots themselves).
SYSTEM_DIRS = ("/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/proc", "/sys", "/dev", "/var")
SYSTEM_DIRS += ("/run",)

Owner = tuple[Path, Message, bool]  # (folder, who owns it, whether everything inside it is owned too)


class FolderError(ValueError):
    """An output folder that may not be used; its argument is the catalog message naming the folder and why."""


def resolve(path: str | Path) -> Path:
    """``path`` as an absolute, resolved path: relative paths from the workspace, ``~`` expanded (a ``~user`` that
    does not exist stays literal), links followed."""
    p = Path(path)
    try:
        p = p.expanduser()
    except RuntimeError:
        pass
    return (p if p.is_absolute() else workspace.home() / p).resolve()


def _system(p: Path) -> bool:
    if p == Path("/") or p == Path.home().resolve():
        return True
    return any(p == Path(d) or p.is_relative_to(d) or p.is_relative_to(Path(d).resolve()) for d in SYSTEM_DIRS)


def output_roots() -> tuple[list[Path], list[Path]]:
    """(the roots STUDIO_OUTPUT_ROOTS allows besides the workspace, the roots it names that are never allowed)."""
    allowed: list[Path] = []
    refused: list[Path] = []
    for part in os.environ.get(ENV_ROOTS, "").split(os.pathsep):
        if part.strip():
            root = resolve(part.strip()) if Path(part.strip()).expanduser().is_absolute() else None
            if root is not None:
                (refused if _system(root) else allowed).append(root)
    return allowed, refused


def workspace_owners() -> list[Owner]:
    """The workspace's own folders, each run folder and base model folder in them first (the most specific owner
    names a folder), without creating any."""
    home = workspace.home()
    owners: list[Owner] = []
    for sub, key in (("runs", "workspace.owner_run"), ("models", "workspace.owner_model")):
        if (home / sub).is_dir():
            for child in sorted((home / sub).iterdir()):
                label = message(key, id=child.name, path=child) if sub == "runs" else message(key, path=child)
                owners.append((child.resolve(), label, True))
    owners += [
        (home / "runs", message("workspace.owner_runs", path=home / "runs"), True),
        (home / "models", message("workspace.owner_models", path=home / "models"), True),
        (home / "data", message("workspace.owner_data", path=home / "data"), True),
        (home / "uploads", message("workspace.owner_uploads", path=home / "uploads"), True),
        (home / "rewards", message("workspace.owner_rewards", path=home / "rewards"), True),
        (home / "presets", message("workspace.owner_presets", path=home / "presets"), True),
        (home / "cache", message("workspace.owner_cache", path=home / "cache"), True),
        (home / "exports", message("workspace.owner_exports", path=home / "exports"), False),
        (home, message("workspace.owner_workspace", path=home), False),
    ]
    registry = message("workspace.owner_registry", path=home / "registry.db")
    owners += [(home / f"registry.db{x}", registry, True) for x in ("", "-wal", "-shm")]
    return owners


def find_owner(
    path: str | Path, extra: Iterable[Owner] = (), *, own: str | Path | None = None
) -> tuple[str, Message] | None:
    """("owned", who) when ``path`` is an owner's folder or inside one owned whole; ("holds", who) when it holds an
    owner's folder; None when nobody owns it but ``own``, a run's own folder (``path`` may be it or inside it; the
    runs folder that holds it does not count)."""
    p = resolve(path)
    mine = resolve(own) if own else None
    owners = [(resolve(f), who, whole) for f, who, whole in [*extra, *workspace_owners()]]
    owners = [o for o in owners if o[0] != mine]
    for folder, who, whole in owners:
        in_mine = mine is not None and p.is_relative_to(mine) and mine.is_relative_to(folder)
        if p == folder or (whole and p.is_relative_to(folder) and not in_mine):
            return "owned", who
    for folder, who, _whole in reversed(owners):  # the outermost owner it holds (the workspace before a run)
        if folder.is_relative_to(p):
            return "holds", who
    return None


def owner_of(path: str | Path, extra: Iterable[Owner] = (), *, own: str | Path | None = None) -> Message | None:
    """Why ``path`` may not be written: ``workspace.owned`` / ``workspace.holds`` naming the owner (``find_owner``)."""
    found = find_owner(path, extra, own=own)
    return None if found is None else message(f"workspace.{found[0]}", path=resolve(path), owner=found[1])


def place_problem(path: str | Path, *, as_page: bool = False) -> Message | None:
    """Why ``path`` may not be an output folder because of where it is (outside the workspace and the allowed roots),
    None when the place is allowed. Owners are ``owner_of``'s business. A command acting for the person at the shell
    (engine.core.acting), or a run with its grant, may write anywhere but a system folder; ``as_page``: the page's
    rule whoever asks."""
    p = resolve(path)
    home = workspace.home()
    if p.is_relative_to(home):
        return None
    if not as_page and (acting.at_shell() or any(p == g or p.is_relative_to(g) for g in acting.granted())):
        return message("workspace.system", path=p) if _system(p) else None  # the person at the shell's choice
    allowed, refused = output_roots()
    if p in allowed:
        return message("workspace.is_root", path=p)
    if any(p.is_relative_to(r) for r in allowed):
        return None
    bad = next((r for r in refused if p.is_relative_to(r)), None)
    if bad is not None:
        return message("workspace.root_refused", path=p, root=bad)
    roots = ", ".join(str(r) for r in allowed) or message("workspace.roots_none")
    return message("workspace.outside", path=p, home=home, roots=roots)


def page_may_write(path: str | Path) -> bool:
    """Whether the page (bound to the workspace and STUDIO_OUTPUT_ROOTS) could write ``path``'s place."""
    return place_problem(path, as_page=True) is None


def output_problem(path: str | Path, extra: Iterable[Owner] = ()) -> Message | None:
    """The one check of an output, merge or export folder: its place, then its owners (the workspace's and
    ``extra``). None when it may be written."""
    return place_problem(path) or owner_of(path, extra)


def output_path(path: str | Path, extra: Iterable[Owner] = ()) -> Path:
    """``path`` resolved when it may be written; else ``FolderError`` with the message naming the folder and why."""
    problem = output_problem(path, extra)
    if problem is not None:
        raise FolderError(problem)
    return resolve(path)


def new_run_output_problem(path: str | Path) -> Message | None:
    """What a *new run's* output folder may not be besides ``output_problem``: a folder in ``exports/`` (merged and
    exported models live there), or an existing folder with files in it (the run would mix its files with files it
    did not write, and could never tell them apart), naming what is there. None when the run may create or use it."""
    p = resolve(path)
    exports = workspace.home() / "exports"
    if p.is_relative_to(exports):
        return message("workspace.in_exports", path=p, exports=exports)
    if p.is_dir():
        try:
            found = sorted(c.name + ("/" if c.is_dir() else "") for c in p.iterdir())
        except OSError:
            return None  # an unreadable folder: the writability check names it
        if found:
            shown = ", ".join(found[:5]) + (f", ... ({len(found)} entries)" if len(found) > 5 else "")
            return message("workspace.not_empty", path=p, found=shown)
    return None
