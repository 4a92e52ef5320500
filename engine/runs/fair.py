"""Fair shares of one studio between its users (team mode, issue 46 item 3): the order in which the scheduler offers
the machine to queued runs (a run the operator or an admin moved to the front goes first), and each member's own
limits (``engine.core.accounts``: ``max_running``, ``max_queued``).

Light: stdlib and engine.core.accounts. Users take turns: the user whose latest run started longest ago (or never)
goes first, and once a user has had a turn in this pass, the others go before their next one; within one user, first
in, first out. In single-user mode (every run the operator's) this is the queue's order unchanged. A member at their
``max_running`` waits with their runs, which do not hold anyone else back.
"""

from __future__ import annotations

from typing import Any

from engine.core import accounts


def order(queued: list[Any], last_start: dict[str, float]) -> list[Any]:
    """``queued`` (oldest first) in the order they are offered the machine: the runs the operator or an admin moved
    to the front (the latest move first; each is its owner's turn), then the users' turns. ``last_start``: owner ->
    when their newest run started."""
    moved = sorted((r for r in queued if getattr(r, "moved", None)), key=lambda r: -r.moved)
    by_owner: dict[str, list[Any]] = {}
    for r in queued:
        if not getattr(r, "moved", None):
            by_owner.setdefault(r.owner or "", []).append(r)
    turns = {o: sum(1 for r in moved if (r.owner or "") == o) for o in by_owner}
    nxt = dict.fromkeys(by_owner, 0)
    out: list[Any] = list(moved)
    while len(out) < len(queued):
        owner = min(
            (o for o in by_owner if nxt[o] < len(by_owner[o])),
            key=lambda o: (turns[o], last_start.get(o, float("-inf")), by_owner[o][nxt[o]].created, o),
        )
        out.append(by_owner[owner][nxt[owner]])
        nxt[owner] += 1
        turns[owner] += 1
    return out


def within_limits(ordered: list[Any], running: dict[str, int]) -> tuple[list[Any], dict[str, int]]:
    """(the runs that may be offered now, {owner: their limit} of owners held at ``max_running``). ``running``:
    owner -> their runs holding a slot now."""
    limits = {o: a.max_running for o in {r.owner or "" for r in ordered} if (a := accounts.quota(o)) and a.max_running}
    taken = dict(running)
    kept, held = [], {}
    for r in ordered:
        owner = r.owner or ""
        cap = limits.get(owner)
        if cap is not None and taken.get(owner, 0) >= cap:
            held[owner] = cap
            continue
        taken[owner] = taken.get(owner, 0) + 1
        kept.append(r)
    return kept, held


def queue_limit(owner: str, queued_now: int) -> int | None:
    """The owner's ``max_queued`` when another queued run would pass it; None when it may queue."""
    account = accounts.quota(owner)
    if account is None or not account.max_queued or queued_now < account.max_queued:
        return None
    return account.max_queued


def running_limit(owner: str) -> int | None:
    account = accounts.quota(owner)
    return account.max_running if account is not None and account.max_running else None
