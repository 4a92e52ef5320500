"""Team mode: who added a registered dataset, an uploaded file or a model folder, and who may list and use it.

Light: stdlib, engine.core.accounts and workspace. Runs and jobs keep their owner in the run registry
(``engine.runs.owners``); what is not a run is written here: ``$STUDIO_HOME/belongings.json`` (file mode 600,
rewritten whole under a lock), ``{"datasets": {dataset folder: {name: owner}}, "paths": {file or folder: owner}}``.
Only a member's or an admin's additions are written; what the ledger does not name is the operator's: the demo,
everything already in the workspace when the accounts came, what the shell registers, imports or copies in.

The rule, one place for the Datasets tab, the Train form, submit, the Models tab and the paths the page reads:

- the operator (the shell, single-user mode) and an admin see and use everything;
- what the operator or an admin added is shared with the whole team read-only: every member lists it and trains on
  it; only the operator or an admin replaces it;
- a member's own additions are theirs alone (and the admins'); another member's answer as unknown: a dataset as one
  not registered, a path refused naming the field.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path

from engine.core import accounts, workspace

FILE = "belongings.json"


def _path() -> Path:
    return workspace.home() / FILE


def _load() -> dict:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _update(change: Callable[[dict], None]) -> None:
    target = _path()
    with open(target.with_name(".belongings.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two uploads at once must not lose each other's owner
        data = _load()
        change(data)
        workspace.write_private_json(target, data)


def _key(path: str | Path) -> str:
    return str(Path(path).expanduser().resolve())


def _owner(owner: str | None) -> str:
    return accounts.owner_of_new() if owner is None else owner


# ----------------------------------------------------------------------------------------------- recording
def record_dataset(dataset_dir: str | Path, name: str, owner: str | None = None) -> None:
    """``name`` in the registry of ``dataset_dir`` belongs to ``owner`` (None: whom this call acts for; the
    operator's is written as nothing)."""
    who, folder = _owner(owner), _key(dataset_dir)
    current = (_load().get("datasets") or {}).get(folder) or {}
    if (current.get(name) or accounts.OPERATOR) == who:
        return

    def change(data: dict) -> None:
        names = data.setdefault("datasets", {}).setdefault(folder, {})
        if who:
            names[name] = who
        else:
            names.pop(name, None)

    _update(change)


def record_path(path: str | Path, owner: str | None = None) -> None:
    """The file or folder ``path`` (an upload, an imported model's folder) belongs to ``owner`` (None: whom this call
    acts for)."""
    who, key = _owner(owner), _key(path)
    if ((_load().get("paths") or {}).get(key) or accounts.OPERATOR) == who:
        return

    def change(data: dict) -> None:
        paths = data.setdefault("paths", {})
        if who:
            paths[key] = who
        else:
            paths.pop(key, None)

    _update(change)


def forget_path(path: str | Path) -> None:
    """``path`` is gone (a deleted model): its owner is forgotten, so a new folder of that name starts unowned."""
    key = _key(path)
    if key in (_load().get("paths") or {}):
        _update(lambda data: (data.get("paths") or {}).pop(key, None))


# ----------------------------------------------------------------------------------------------- reading
def dataset_owner(dataset_dir: str | Path, name: str) -> str:
    return str(((_load().get("datasets") or {}).get(_key(dataset_dir)) or {}).get(name) or accounts.OPERATOR)


def path_owner(path: str | Path) -> str:
    """The owner of ``path``: recorded for it or for the nearest folder above it that is recorded (a file inside an
    imported model's folder is that model's); the operator's when none is."""
    paths = _load().get("paths") or {}
    if not paths:
        return accounts.OPERATOR
    p = Path(_key(path))
    for candidate in (p, *p.parents):
        if str(candidate) in paths:
            return str(paths[str(candidate)])
    return accounts.OPERATOR


def shared(owner: str) -> bool:
    """Whether what ``owner`` added is shared with the whole team (read-only): the operator's and an admin's."""
    if (owner or accounts.OPERATOR) == accounts.OPERATOR:
        return True
    account = accounts.load().get(owner)
    return account is not None and account.admin


def may_use(owner: str) -> bool:
    """Whether the current call may list and use something ``owner`` added."""
    who = accounts.viewer()
    return who is None or owner == who.name or shared(owner)


def may_change(owner: str) -> bool:
    """Whether the current call may replace or delete something ``owner`` added: its owner, the operator, an admin."""
    who = accounts.viewer()
    return who is None or owner == who.name


def usable_dataset(dataset_dir: str | Path, name: str) -> bool:
    return accounts.viewer() is None or may_use(dataset_owner(dataset_dir, name))


def usable_datasets(dataset_dir: str | Path, names) -> list[str]:
    """The names of ``names`` registered in ``dataset_dir`` that the current caller may list and use, sorted."""
    if accounts.viewer() is None:
        return sorted(names)
    held = (_load().get("datasets") or {}).get(_key(dataset_dir)) or {}
    return sorted(n for n in names if may_use(str(held.get(n) or accounts.OPERATOR)))


def refusal(
    dataset_dir: str | Path, name: str, registered: bool, overwrite: bool, owner: str | None
) -> tuple[str | None, str | None]:
    """(why the current call may not register ``name`` in ``dataset_dir``, the owner of the entry there); the reason
    is the data catalog's key: ``already_registered`` (taken, without ``overwrite``, or another member's, which
    answers as any taken name does), ``read_only`` (the operator's or an admin's, shared with the team: a member does
    not replace it). ``owner`` given: the studio registers for that owner (the Chat tab's feedback sets), refused
    only without ``overwrite``."""
    if not registered:
        return None, None
    held = dataset_owner(dataset_dir, name)
    if not overwrite or (owner is None and not may_use(held)):
        return "already_registered", held
    return (None if owner is not None or may_change(held) else "read_only"), held


def usable_path(path: str | Path) -> bool:
    return accounts.viewer() is None or may_use(path_owner(path))
