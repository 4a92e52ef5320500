"""How samples share rows, as numbers only: the one packing algorithm the trainer (engine.trainer.packed_rows) and the
page's dataset inspector (studio/tabs/data.py) both use, so the efficiency the page predicts is the one the run gets.

Light: stdlib only (no datasets, no torch).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


def best_fit_bins(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Sample indices grouped into rows of at most ``capacity`` tokens: best-fit decreasing, deterministic (longest
    first, ties by index; each sample goes to the fullest row it still fits in, else opens a row). A sample longer
    than ``capacity`` gets a row of its own (callers truncate to the cutoff first)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (remaining capacity, bin index), sorted: best fit = first with room
    for i in order:
        n = lengths[i]
        at = bisect.bisect_left(free, (n, -1))
        if at < len(free):
            room, b = free.pop(at)
        else:
            room, b = capacity, len(bins)
            bins.append([])
        bins[b].append(i)
        bisect.insort(free, (room - n, b))
    return bins


def packing_efficiency(lengths: Sequence[int], capacity: int) -> float:
    """Share of packed-row positions holding real tokens, samples truncated to ``capacity`` first."""
    if not lengths or capacity <= 0:
        return 0.0
    cut = [min(n, capacity) for n in lengths]
    bins = best_fit_bins(cut, capacity)
    return sum(cut) / (len(bins) * capacity)


def pt_blocks(lengths: Sequence[int], block: int, packing: bool) -> dict[str, int]:
    """Stage pt's blocks from the texts' token counts, as engine.trainer.packed_rows.split_into_blocks cuts them:
    packing joins the texts and cuts floor(total / block) full blocks, dropping the tail; otherwise each text of n
    tokens gives ceil(n / block) blocks and nothing is dropped. {"blocks", "tokens", "tail", "split" (texts over one
    block)}."""
    total = sum(lengths)
    if packing:
        blocks, tail = divmod(total, block)
    else:
        blocks, tail = sum(-(-n // block) for n in lengths), 0
    return {"blocks": blocks, "tokens": total, "tail": tail, "split": sum(n > block for n in lengths)}
