"""A process's CPU as the kernel counts it, from /proc/PID/stat: the benches that measure CPU read it here.

Standard library only (``bench/suite_cpu.py`` runs before ``.venv`` exists)."""

from __future__ import annotations

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def start_and_ticks(pid: int | str) -> tuple[str, int]:
    """(start time since boot, user + system ticks of all its threads) of process ``pid``: fields 22, 14 and 15 of
    /proc/PID/stat, read after the command name (which may hold spaces and parentheses). OSError when it is gone."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return fields[19], int(fields[11]) + int(fields[12])


def cpu_s(pid: int | str) -> float:
    """CPU seconds (user + system, all threads) the process has used: unlike wall time, barely moved by what else
    runs on the machine."""
    return start_and_ticks(pid)[1] / CLK_TCK


def tree_cpu_s(root: int, name: str) -> float:
    """CPU seconds of the processes under ``root`` (children, grandchildren, ...) whose command name is ``name``
    (e.g. every process of a browser this script launched), as they stand now; ones that ended are not counted."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        names[int(entry)] = text[text.index("(") + 1 : text.rindex(")")]
        parents[int(entry)] = int(text.rsplit(")", 1)[1].split()[1])
    total = 0.0
    for pid, comm in names.items():
        up, seen = parents.get(pid), 0
        while up and up != root and seen < 64:
            up, seen = parents.get(up), seen + 1
        if up == root and comm == name:
            try:
                total += cpu_s(pid)
            except OSError:
                pass
    return total
