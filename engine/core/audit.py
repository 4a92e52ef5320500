"""The audit log: who logged in, started, stopped, deleted, renamed, exported, pushed, served or downloaded what, and
when (issue 46 item 5).

Light: stdlib and engine.core (accounts, acting, workspace). One JSON object per line in ``<workspace>/audit.jsonl``
(file mode 600), only ever appended (``O_APPEND``: lines written by several processes at once stay whole, and no
line is rewritten): ``{"ts", "who", "via", "action", "target", "detail"}``. ``who`` is the logged-in member or
``operator`` (the shell, single-user mode, the studio's own threads); ``via`` is ``shell`` (the ``studio`` command
line), ``api`` (a member's command line with a personal token, studio.member_api) or ``studio`` (the page and what
it runs). An entry that cannot be written (a full disk) never stops the
action it records. ``studio audit`` prints it; the page shows it to admins and the operator only
(``engine.core.accounts.viewer`` is None for them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from engine.core import accounts, acting, workspace

FILE = "audit.jsonl"
OPERATOR_NAME = "operator"


def path() -> Path:
    return workspace.home() / FILE


def actor() -> str:
    """Who the current call acts for, by name."""
    return accounts.owner_of_new() or OPERATOR_NAME


def record(action: str, target: str = "", *, who: str | None = None, **detail: Any) -> None:
    """Append one entry. ``who``: for the login, the name that tried (nobody is logged in yet)."""
    entry = {
        "ts": round(time.time(), 3),
        "who": who if who is not None else actor(),
        "via": "shell" if acting.at_shell() else "api" if accounts.token_caller() else "studio",
        "action": action,
        "target": str(target),
        "detail": {k: v for k, v in detail.items() if v not in (None, "", [], {})},
    }
    line = (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    try:
        fd = os.open(path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        pass


def entries(limit: int = 200, *, who: str | None = None, action: str | None = None) -> list[dict]:
    """The newest entries first, at most ``limit``; ``who`` / ``action`` keep only those. Nothing for a member: the
    log is the admins' and the operator's (a torn or foreign line is skipped)."""
    if accounts.viewer() is not None:
        return []
    try:
        lines = path().read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found: list[dict] = []
    for raw in reversed(lines):
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(e, dict) or (who and e.get("who") != who) or (action and e.get("action") != action):
            continue
        found.append(e)
        if len(found) >= limit:
            break
    return found


def line(e: dict) -> str:
    """One entry as the terminal shows it."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(e.get("ts") or 0)))
    detail = " ".join(f"{k}={v}" for k, v in (e.get("detail") or {}).items())
    head = f"{when}  {e.get('who', '?'):<12} {e.get('via', '?'):<6} {e.get('action', '?'):<12}"
    return f"{head} {e.get('target', '')}" + (f"  {detail}" if detail else "")


def cli(argv: list[str] | None = None) -> int:
    """``studio audit [--limit N] [--user NAME] [--action ACTION] [--json]``."""
    import argparse

    p = argparse.ArgumentParser(prog="studio audit", description="who did what in this workspace, newest first")
    p.add_argument("--limit", type=int, default=50, help="entries to show (default 50)")
    p.add_argument("--user", help="only this user's entries (operator: the shell and single-user mode)")
    p.add_argument("--action", help="only this action (login, login-failed, start, stop, delete, rename, job)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = p.parse_args(argv)
    for e in reversed(entries(max(1, args.limit), who=args.user, action=args.action)):
        print(json.dumps(e, ensure_ascii=False) if args.json else line(e))
    return 0
