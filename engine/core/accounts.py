"""Team mode: the studio's accounts, and whom a call acts for.

Light: stdlib and argon2-cffi. Accounts live in ``$STUDIO_HOME/accounts.json`` (file mode 600, written whole and
renamed into place): a name, whether it is an admin, and its password's argon2id hash; passwords themselves are never
stored, printed nor logged. No accounts file (or an empty one): single-user mode, as before: the page has the one
``--auth`` login or none, and everyone who reaches it sees every run.

With accounts, ``studio webui`` logs people in with them (``studio.app``) and every run records its owner (the
registry's ``owner`` column and ``run.json``; ``engine.runs.owners``). Whom a call acts for is asked of a *viewer
source*, a function the page installs (``set_viewer_source``: the logged-in user of the gradio request being
handled). A call with no viewer (the shell, the page's own background threads, a run's wrapper) acts for the
machine's operator, who sees everything; so does an admin. A member sees only their own runs. Runs from before team
mode, and runs submitted at the shell, have the owner ``""``: the operator's.
"""

from __future__ import annotations

import contextvars
import functools
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from engine.core import workspace
from engine.core.messages import message

FILE = "accounts.json"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
MIN_PASSWORD = 8
OPERATOR = ""  # the owner of runs made at the shell and of runs from before team mode

_HASHER = PasswordHasher()  # argon2id, the library's (RFC 9106 low-memory) parameters


class AccountError(ValueError):
    """An account operation that cannot be done; the message names the account or the rule."""


@dataclass(frozen=True)
class Account:
    name: str
    admin: bool = False
    hash: str = ""
    max_running: int = 0  # the member's runs that may run at once (GPU or CPU slots); 0: no limit of their own
    max_queued: int = 0  # the member's runs that may wait in the queue; 0: no limit
    max_disk_gb: float = 0.0  # what the member's runs and jobs may hold in the workspace (GB); 0: no limit


def path(home: str | Path | None = None) -> Path:
    return (Path(home).expanduser() if home else workspace.home()) / FILE


def load(home: str | Path | None = None) -> dict[str, Account]:
    """The accounts by name ({} when there is no file: single-user mode); ``home``: another workspace's."""
    try:
        data = json.loads(path(home).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # a damaged file must not silently open the studio to everyone
        raise AccountError(message("workspace.accounts_unreadable", path=path(), error=exc)) from None
    return {
        n: Account(
            n,
            bool(a.get("admin")),
            str(a.get("hash", "")),
            max(0, int(a.get("max_running") or 0)),
            max(0, int(a.get("max_queued") or 0)),
            max(0.0, float(a.get("max_disk_gb") or 0)),
        )
        for n, a in (data.get("accounts") or {}).items()
    }


def _save(accounts: dict[str, Account]) -> None:
    body = {
        "accounts": {
            a.name: {
                "admin": a.admin,
                "hash": a.hash,
                "max_running": a.max_running,
                "max_queued": a.max_queued,
                "max_disk_gb": a.max_disk_gb,
            }
            for a in accounts.values()
        }
    }
    workspace.write_private_json(path(), body)


def team_mode(home: str | Path | None = None) -> bool:
    return bool(load(home))


def _checked_password(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise AccountError(message("workspace.account_short_password", n=MIN_PASSWORD))
    return password


def add(name: str, password: str, *, admin: bool = False) -> Account:
    if not NAME.fullmatch(name or ""):
        raise AccountError(message("workspace.account_bad_name", name=name))
    accounts = load()
    if name in accounts:
        raise AccountError(message("workspace.account_exists", name=name))
    accounts[name] = Account(name, admin, _HASHER.hash(_checked_password(password)))
    _save(accounts)
    return accounts[name]


def set_password(name: str, password: str) -> None:
    accounts = load()
    if name not in accounts:
        raise AccountError(message("workspace.account_unknown", name=name))
    accounts[name] = replace(accounts[name], hash=_HASHER.hash(_checked_password(password)))
    _save(accounts)


def set_quota(
    name: str, *, max_running: int | None = None, max_queued: int | None = None, max_disk_gb: float | None = None
) -> Account:
    """A member's share of the studio: runs at once (``max_running``), runs waiting (``max_queued``) and what their
    runs and jobs hold in the workspace (``max_disk_gb``); 0 lifts the limit, None keeps it."""
    accounts = load()
    if name not in accounts:
        raise AccountError(message("workspace.account_unknown", name=name))
    for value in (max_running, max_queued, max_disk_gb):
        if value is not None and not value >= 0:
            raise AccountError(message("workspace.account_bad_quota", value=value))
    a = accounts[name]
    accounts[name] = replace(
        a,
        max_running=a.max_running if max_running is None else max_running,
        max_queued=a.max_queued if max_queued is None else max_queued,
        max_disk_gb=a.max_disk_gb if max_disk_gb is None else float(max_disk_gb),
    )
    _save(accounts)
    return accounts[name]


def quota(owner: str) -> Account | None:
    """The account whose limits apply to runs owned by ``owner`` (None: the operator, or single-user mode)."""
    return load().get(owner) if owner else None


def remove(name: str) -> None:
    """Forget an account (its runs stay, seen by admins). The last admin goes only with the other accounts gone."""
    accounts = load()
    if name not in accounts:
        raise AccountError(message("workspace.account_unknown", name=name))
    gone = accounts.pop(name)
    if gone.admin and accounts and not any(a.admin for a in accounts.values()):
        raise AccountError(message("workspace.account_last_admin", name=name))
    _save(accounts)


def verify(name: str, password: str) -> bool:
    """The login check: True only for an existing account and its password. An unknown name costs a hash too."""
    dummy = _dummy_hash()  # made on the first check whichever name it is for: the first answer is as slow for all
    account = load().get(name)
    try:
        return _HASHER.verify(account.hash if account else dummy, password) and account is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


@functools.cache
def _dummy_hash() -> str:
    """What an unknown name's password is checked against, made on the first login check (an argon2 hash costs ~0.15 s
    of CPU and 64 MiB: every `studio` command, runner and trainer imports this module and most never check one)."""
    return _HASHER.hash("not a password of anyone's")


# ----------------------------------------------------------------------------------------------- whom a call acts for
_VIEWER_SOURCE: Callable[[], str | None] | None = None
# a member's request with their personal token (studio.member_api): acts for them whatever the viewer source says
_ACTING_FOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("studio_acting_for", default=None)


@contextmanager
def acting_for(name: str) -> Iterator[None]:
    """Within: calls act for the account ``name`` (a member's API request, authenticated by their token)."""
    token = _ACTING_FOR.set(name)
    try:
        yield
    finally:
        _ACTING_FOR.reset(token)


def token_caller() -> str | None:
    """The account whose personal token the call being handled came with (studio.member_api), or None."""
    return _ACTING_FOR.get()


def _asking() -> str | None:
    return _ACTING_FOR.get() or (_VIEWER_SOURCE() if _VIEWER_SOURCE is not None else None)


def set_viewer_source(source: Callable[[], str | None] | None) -> None:
    """The page installs the function that names the logged-in user of the request being handled (None outside one)."""
    global _VIEWER_SOURCE
    _VIEWER_SOURCE = source


def viewer() -> Account | None:
    """The member this call acts for; None for the operator (no viewer source, no request, single-user mode, or an
    admin). A logged-in name that is no longer an account sees nothing: an Account with no rights."""
    name = _asking()
    if not name:
        return None
    accounts = load()
    if not accounts:
        return None
    account = accounts.get(name, Account(name, admin=False))
    return None if account.admin else account


def owner_of_new() -> str:
    """The owner a run submitted now records: the logged-in user, or the operator."""
    name = _asking()
    return str(name) if name and team_mode() else OPERATOR


def may_see(owner: str | None) -> bool:
    """Whether the current call may see (and act on) something owned by ``owner``."""
    who = viewer()
    return who is None or (owner or OPERATOR) == who.name


# ----------------------------------------------------------------------------------------------- studio users
def _limits(a: Account) -> str:
    running = f"{a.max_running} running at once" if a.max_running else "no limit running"
    queued = f"{a.max_queued} queued" if a.max_queued else "no limit queued"
    disk = f"{a.max_disk_gb:g} GB on disk" if a.max_disk_gb else "no limit on disk"
    return f"{running}, {queued}, {disk}"


def _read_password(args, twice: bool) -> str:
    import getpass
    import sys

    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"password for {args.name}: ")
    if twice and getpass.getpass("again: ") != first:
        raise AccountError(message("workspace.account_mismatch"))
    return first


def cli(argv: list[str] | None = None) -> int:
    """``studio users add NAME [--admin] [--password-stdin] | list | passwd NAME [--password-stdin] | remove NAME``."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="studio users", description="The studio's accounts (team mode when any exist).")
    sub = p.add_subparsers(dest="action", required=True)
    add_p = sub.add_parser("add", help="add an account; asks for its password")
    add_p.add_argument("name")
    add_p.add_argument("--admin", action="store_true", help="sees and acts on every run")
    sub.add_parser("list", help="the accounts and which are admins")
    pw_p = sub.add_parser("passwd", help="set an account's password")
    pw_p.add_argument("name")
    for q in (add_p, pw_p):
        q.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    rm_p = sub.add_parser("remove", help="remove an account (its runs stay)")
    rm_p.add_argument("name")
    q_p = sub.add_parser("quota", help="a member's share: runs at once, runs waiting, disk (0: no limit)")
    q_p.add_argument("name")
    q_p.add_argument("--max-running", type=int, help="the member's runs running at once (GPU or CPU slots)")
    q_p.add_argument("--max-queued", type=int, help="the member's runs waiting in the queue")
    q_p.add_argument(
        "--max-disk-gb", type=float, help="what the member's runs and jobs may hold in the workspace, in GB"
    )
    args = p.parse_args(argv)
    try:
        if args.action == "add":
            account = add(args.name, _read_password(args, twice=True), admin=args.admin)
            print(f"added {account.name}" + (" (admin)" if account.admin else "") + f" to {path()}")
        elif args.action == "passwd":
            if args.name not in load():  # said before asking for a password
                raise AccountError(message("workspace.account_unknown", name=args.name))
            set_password(args.name, _read_password(args, twice=True))
            print(f"password of {args.name} changed")
        elif args.action == "quota":
            a = set_quota(
                args.name, max_running=args.max_running, max_queued=args.max_queued, max_disk_gb=args.max_disk_gb
            )
            print(f"{a.name}: {_limits(a)}")
        elif args.action == "remove":
            remove(args.name)
            print(f"removed {args.name}" + ("" if load() else "; no accounts left: single-user mode"))
        else:
            accounts = load()
            for a in sorted(accounts.values(), key=lambda a: a.name):
                print(f"{a.name}\t{'admin' if a.admin else 'member'}\t{_limits(a)}")
            if not accounts:
                print("no accounts: single-user mode (studio webui --auth USER:PASS, or none on 127.0.0.1)")
    except AccountError as exc:
        print(f"studio users: {exc}", file=sys.stderr)
        return 2
    return 0
