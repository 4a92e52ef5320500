"""A process's CPU as the kernel counts it, from /proc/PID/stat: the benches that measure CPU read it here.

Standard library only (``bench/suite_cpu.py`` runs before ``.venv`` exists)."""

from __future__ import annotations

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> tuple[str, list[str]]:
    """(command name, the fields after it) of /proc/PID/stat: the name may hold spaces and parentheses, so the fields
    are read after its last ")". OSError when the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    head, rest = text.rsplit(")", 1)
    return head[head.index("(") + 1 :], rest.split()


def start_and_ticks(pid: int | str) -> tuple[str, int]:
    """(start time since boot, user + system ticks of all its threads) of process ``pid``: fields 22, 14 and 15 of
    /proc/PID/stat. OSError when it is gone."""
    fields = _stat(pid)[1]
    return fields[19], int(fields[11]) + int(fields[12])


def cpu_s(pid: int | str) -> float:
    """CPU seconds (user + system, all threads) the process has used: unlike wall time, barely moved by what else
    runs on the machine."""
    return start_and_ticks(pid)[1] / CLK_TCK


def tree_cpu_s(root: int, name: str) -> float:
    """CPU seconds of the processes under ``root`` (children, grandchildren, ...) whose command name is ``name``
    (e.g. every process of a browser this script launched), as they stand now; ones that ended are not counted."""
    parents: dict[int, int] = {}
    named: dict[int, int] = {}  # pid -> its ticks, for the processes called ``name``
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm, fields = _stat(entry)
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        if comm == name:
            named[int(entry)] = int(fields[11]) + int(fields[12])
    total = 0
    for pid, ticks in named.items():
        up, seen = parents.get(pid), 0
        while up and up != root and seen < 64:
            up, seen = parents.get(up), seen + 1
        if up == root:
            total += ticks
    return total / CLK_TCK
