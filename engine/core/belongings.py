"""Team mode: who added a registered dataset, an uploaded file or a model folder, and who may list and use it.

Light: stdlib, engine.core (accounts, audit, messages, workspace). Runs and jobs keep their owner in the run registry
(``engine.runs.owners``); what is not a run is written here: ``$STUDIO_HOME/belongings.json`` (file mode 600,
rewritten whole under a lock), ``{"datasets": {dataset folder: {name: owner}}, "paths": {file or folder: owner},
"readers": {"datasets": {dataset folder: {name: [account or "*"]}}, "paths": {file or folder: [...]}}}``.
Only a member's or an admin's additions are written; what the ledger does not name is the operator's: the demo,
everything already in the workspace when the accounts came, what the shell registers, imports or copies in.

The rule, one place for the Datasets tab, the Train form, submit, the Models tab and the paths the page reads:

- the operator (the shell, single-user mode) and an admin see and use everything;
- what the operator or an admin added is shared with the whole team read-only: every member lists it and trains on
  it; only the operator or an admin replaces it;
- a member's own additions are theirs alone (and the admins'), unless they share one read-only with named accounts
  or everyone (``share_dataset``, ``share_path``: ``studio data share``, ``studio models share``, the Datasets and
  Models tabs); another member's answer as unknown: a dataset as one not registered, a path refused naming the field.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path

from engine.core import accounts, audit, workspace
from engine.core.messages import message

EVERYONE = "*"

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
    """``path`` is gone (a deleted model): its owner and readers are forgotten, so a new folder of that name starts
    unowned."""
    key = _key(path)
    data = _load()
    if key in (data.get("paths") or {}) or key in ((data.get("readers") or {}).get("paths") or {}):

        def change(data: dict) -> None:
            (data.get("paths") or {}).pop(key, None)
            ((data.get("readers") or {}).get("paths") or {}).pop(key, None)

        _update(change)


# ----------------------------------------------------------------------------------------------- reading
def dataset_owner(dataset_dir: str | Path, name: str) -> str:
    return str(((_load().get("datasets") or {}).get(_key(dataset_dir)) or {}).get(name) or accounts.OPERATOR)


def dataset_readers(dataset_dir: str | Path, name: str) -> list[str]:
    """The accounts a dataset is shared with read-only (``*``: everyone), beside its owner."""
    held = ((_load().get("readers") or {}).get("datasets") or {}).get(_key(dataset_dir)) or {}
    return list(held.get(name) or [])


def _path_entry(path: str | Path, data: dict | None = None) -> tuple[str, str | None]:
    """(the owner of ``path``, the recorded file or folder that says so: ``path`` or the nearest folder above it that
    is recorded, a file inside an imported model's folder being that model's); (the operator, None) when none is."""
    paths = (_load() if data is None else data).get("paths") or {}
    if paths:
        p = Path(_key(path))
        for candidate in (p, *p.parents):
            if str(candidate) in paths:
                return str(paths[str(candidate)]), str(candidate)
    return accounts.OPERATOR, None


def path_owner(path: str | Path) -> str:
    """The owner of ``path`` (``_path_entry``); the operator's when nothing recorded holds it."""
    return _path_entry(path)[0]


def path_readers(path: str | Path) -> list[str]:
    """The accounts the recorded file or folder holding ``path`` is shared with read-only (``*``: everyone)."""
    data = _load()
    _, key = _path_entry(path, data)
    return list(((data.get("readers") or {}).get("paths") or {}).get(key) or []) if key else []


def shared(owner: str) -> bool:
    """Whether what ``owner`` added is shared with the whole team (read-only): the operator's and an admin's."""
    if (owner or accounts.OPERATOR) == accounts.OPERATOR:
        return True
    account = accounts.load().get(owner)
    return account is not None and account.admin


def may_use(owner: str, readers: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether the current call may list and use something ``owner`` added and shared with ``readers``."""
    who = accounts.viewer()
    return who is None or owner == who.name or shared(owner) or EVERYONE in readers or who.name in readers


def may_change(owner: str) -> bool:
    """Whether the current call may replace or delete something ``owner`` added: its owner, the operator, an admin."""
    who = accounts.viewer()
    return who is None or owner == who.name


def usable_dataset(dataset_dir: str | Path, name: str) -> bool:
    if accounts.viewer() is None:
        return True
    return may_use(dataset_owner(dataset_dir, name), dataset_readers(dataset_dir, name))


def usable_datasets(dataset_dir: str | Path, names) -> list[str]:
    """The names of ``names`` registered in ``dataset_dir`` that the current caller may list and use, sorted."""
    if accounts.viewer() is None:
        return sorted(names)
    data, folder = _load(), _key(dataset_dir)
    held = (data.get("datasets") or {}).get(folder) or {}
    readers = ((data.get("readers") or {}).get("datasets") or {}).get(folder) or {}
    return sorted(n for n in names if may_use(str(held.get(n) or accounts.OPERATOR), readers.get(n) or ()))


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
    return accounts.viewer() is None or may_use(path_owner(path), path_readers(path))


# ----------------------------------------------------------------------------------------------- sharing
class ShareError(ValueError):
    """Sharing refused; the argument is a catalog message naming why."""


def _readers(names, owner: str) -> list[str]:
    known = accounts.load()
    clean = sorted({str(n).strip() for n in names if str(n).strip()})
    for name in clean:
        if name != EVERYONE and name not in known:
            raise ShareError(message("workspace.share_unknown", name=name))
    return [EVERYONE] if EVERYONE in clean else [n for n in clean if n != owner]


def _share(kind: str, where: str, name: str | None, owner: str, names, what: str) -> list[str]:
    if not accounts.team_mode():
        raise ShareError(message("workspace.share_no_team"))
    if owner == accounts.OPERATOR or shared(owner):
        raise ShareError(message("workspace.share_already", what=what))
    if not may_change(owner):
        raise ShareError(message("workspace.share_not_yours", what=what, owner=owner))
    readers = _readers(names, owner)

    def change(data: dict) -> None:
        table = data.setdefault("readers", {}).setdefault(kind, {})
        if name is None:
            table[where] = readers
        else:
            table.setdefault(where, {})[name] = readers

    _update(change)
    audit.record("share", what, shared=",".join(readers) or "-")
    return readers


def share_dataset(dataset_dir: str | Path, name: str, names, *, registered: bool) -> list[str]:
    """Share the dataset ``name`` (``registered`` in ``dataset_dir``'s dataset_info.json, as the caller read it)
    read-only with the accounts ``names`` (``["*"]``: everyone, ``[]``: nobody again): its owner or an admin may, and
    only a member's (the operator's and admins' are everyone's already); another member's answers as one not
    registered. Returns the accounts it is shared with now."""
    if not registered or not usable_dataset(dataset_dir, name):
        raise ShareError(message("workspace.share_no_dataset", name=name, path=dataset_dir))
    return _share("datasets", _key(dataset_dir), name, dataset_owner(dataset_dir, name), names, f"dataset {name!r}")


def share_path(path: str | Path, names) -> list[str]:
    """Share a member's model folder or upload (the recorded folder holding ``path``) read-only, as
    ``share_dataset`` does a dataset."""
    owner, key = _path_entry(path)
    return _share("paths", key or _key(path), None, owner, names, str(key or path))
