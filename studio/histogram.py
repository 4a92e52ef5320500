"""The Datasets tab's token-length histogram, drawn as an inline SVG: bars binned so the cutoff is a bin edge (a bar
holds rows of one side only: lengths up to the cutoff are kept whole, longer ones are cut), each bar in its side's
colour, the cutoff as a dashed vertical line, integer ticks on both axes, and a tooltip per bar naming its lengths
and rows.

Why not gr.BarPlot: it draws a bar at its bin's start with no width of its own, cannot draw the cutoff line, and
picks its own ticks (``14.000000`` for a single length); the colour of a bar straddling the cutoff was a guess.

Light: the standard library only (no gradio, no pandas); the page's texts come in already translated.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

TARGET_BINS = 20
WIDTH, HEIGHT = 760, 250
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 12, 42  # the plot area's margins inside the SVG


@dataclass(frozen=True)
class Bin:
    """Rows whose length is in ``first..last`` (both inclusive); ``over``: longer than the cutoff."""

    first: int
    last: int
    rows: int
    over: bool


def bin_width(counts: list[int], cutoff: int, target: int = TARGET_BINS) -> int:
    """Tokens per bar: about ``target`` bars from 0 to the longest row or the cutoff, whichever is further."""
    top = max(max(counts, default=0), cutoff, 1)
    return max(1, -(-top // target))


def bins(counts: list[int], cutoff: int, target: int = TARGET_BINS) -> list[Bin]:
    """The bars, left to right, only those holding rows. Bin edges are ``cutoff + k * width``: bar ``k`` holds the
    lengths in ``(cutoff + (k-1)*width, cutoff + k*width]``, so a row of exactly ``cutoff`` tokens is in the last bar
    left of the cutoff (kept whole, as the trainer keeps it) and every bar lies on one side."""
    cutoff = max(int(cutoff or 0), 0)
    width = bin_width(counts, cutoff, target)
    held: dict[int, int] = {}
    for c in counts:
        k = -((cutoff - c) // width)  # ceil((c - cutoff) / width)
        held[k] = held.get(k, 0) + 1
    return [Bin(max(cutoff + (k - 1) * width + 1, 0), cutoff + k * width, n, k > 0) for k, n in sorted(held.items())]


def nice_step(span: float, most: int = 8) -> int:
    """An integer tick step of 1, 2 or 5 times a power of ten giving at most ``most`` intervals over ``span``."""
    if span <= 0:
        return 1
    raw = span / most
    power = 10 ** max(0, math.floor(math.log10(raw))) if raw >= 1 else 1
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return int(m * power)
    return int(10 * power)  # pragma: no cover - the loop always returns


def ticks(top: int, most: int = 8) -> list[int]:
    step = nice_step(top, most)
    return list(range(0, top + 1, step))


def svg(
    bars: list[Bin],
    cutoff: int,
    sides: tuple[tuple[str, str], tuple[str, str]],
    texts: dict[str, str],
) -> str:
    """The chart. ``sides``: (label, colour) of the bars within and over the cutoff; ``texts``: the page's words for
    ``x`` (axis title), ``y``, ``cutoff`` (the line's legend, with ``{cutoff}``) and ``tip`` (a bar's tooltip, with
    ``{first}``, ``{last}``, ``{rows}``)."""
    if not bars:
        return ""
    x_top = max(bars[-1].last, cutoff, 1)
    x_ticks = ticks(x_top)
    x_top = max(x_top, x_ticks[-1])
    y_ticks = ticks(max(b.rows for b in bars), 5)
    if y_ticks[-1] < max(b.rows for b in bars):
        y_ticks.append(y_ticks[-1] + (y_ticks[1] if len(y_ticks) > 1 else 1))
    y_top = max(y_ticks[-1], 1)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(v: float) -> float:
        return LEFT + pw * v / x_top

    def sy(v: float) -> float:
        return TOP + ph * (1 - v / y_top)

    parts = [
        f'<svg class="len-hist" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" data-cutoff="{cutoff}">'
    ]
    for v in y_ticks:
        y = sy(v)
        parts.append(
            f'<line class="grid" x1="{LEFT}" x2="{LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" '
            'stroke-opacity="0.15"/>'
            f'<text class="y-tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="currentColor">{v}</text>'
        )
    for v in x_ticks:
        x = sx(v)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP + ph}" y2="{TOP + ph + 4}" stroke="currentColor"/>'
            f'<text class="x-tick" x="{x:.1f}" y="{TOP + ph + 16}" text-anchor="middle" font-size="11" '
            f'fill="currentColor">{v}</text>'
        )
    for b in bars:
        color = sides[1][1] if b.over else sides[0][1]
        x0, x1 = sx(b.first - 1 if b.first > 0 else 0), sx(b.last)
        y = sy(b.rows)
        tip = texts["tip"].format(first=b.first, last=b.last, rows=b.rows)
        parts.append(
            f'<rect class="bar" x="{x0:.2f}" y="{y:.2f}" width="{max(x1 - x0 - 1, 1):.2f}" '
            f'height="{TOP + ph - y:.2f}" fill="{color}" data-first="{b.first}" data-last="{b.last}" '
            f'data-rows="{b.rows}"><title>{html.escape(tip)}</title></rect>'
        )
    parts.append(
        f'<line class="axis" x1="{LEFT}" x2="{LEFT + pw}" y1="{TOP + ph}" y2="{TOP + ph}" stroke="currentColor"/>'
    )
    if cutoff > 0:
        x = sx(cutoff)
        parts.append(
            f'<line class="cutoff" x1="{x:.2f}" x2="{x:.2f}" y1="{TOP}" y2="{TOP + ph}" stroke="currentColor" '
            'stroke-width="2" stroke-dasharray="5 3"/>'
        )
    parts.append(
        f'<text x="{LEFT + pw / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle" font-size="12" fill="currentColor">'
        f"{html.escape(texts['x'])}</text>"
        f'<text transform="translate(12 {TOP + ph / 2:.1f}) rotate(-90)" text-anchor="middle" font-size="12" '
        f'fill="currentColor">{html.escape(texts["y"])}</text></svg>'
    )
    used = [sides[1] if b.over else sides[0] for b in bars]
    shown = list(dict.fromkeys(used))  # the sides the bars show, once each (pt with packing: one)
    legend = "".join(
        f'<span class="hist-key"><i style="background:{color}"></i>{html.escape(label)}</span>'
        for label, color in shown
    )
    if cutoff > 0:
        legend += f'<span class="hist-key hist-cut"><i></i>{html.escape(texts["cutoff"].format(cutoff=cutoff))}</span>'
    return "".join(parts) + f'<div class="hist-legend">{legend}</div>'
