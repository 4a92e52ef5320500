"""How Studio writes a number of bytes for a person, written once: a size on disk or over the network (decimal
units, as file managers, hubs and ``df -H`` say them) and an amount of memory (binary units, as ``nvidia-smi`` and
the plan say them).

Light: stdlib only.
"""

from __future__ import annotations

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def file_size(n: float) -> str:
    """A file's, a folder's or a download's size: ``512 B``, ``1.5 KB``, ``13.4 GB``."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def memory_size(n: float | None) -> str:
    """An amount of memory: ``2.00 GiB``, ``350 MiB``; ``?`` when unknown."""
    if n is None:
        return "?"
    if n >= GiB:
        return f"{n / GiB:.2f} GiB"
    return f"{n / MiB:.0f} MiB"
