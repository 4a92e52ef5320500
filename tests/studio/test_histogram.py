"""The Datasets tab's length histogram (issue 27 item 7): every row counted in exactly one bar, a bar on one side of
the cutoff only (a row of exactly the cutoff is kept whole, so it is drawn within), integer ticks, and in the drawn
SVG each bar in its side's colour on its side of the cutoff line. Expected figures are counted here from the lengths
themselves, not by the module's own code."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest

from engine.data.masked_samples import token_lengths
from studio import histogram
from studio.tabs import data

NS = "{http://www.w3.org/2000/svg}"
SIDES = (("within cutoff", "#1f77b4"), ("over cutoff", "#d62728"))
WORDS = {"x": "tokens", "y": "rows", "cutoff": "cutoff {cutoff}", "tip": "{first}–{last} tokens: {rows} rows"}


def _check_bins(counts: list[int], cutoff: int) -> list[histogram.Bin]:
    bars = histogram.bins(counts, cutoff)
    for a, b in zip(bars, bars[1:]):
        assert a.last < b.first, bars  # left to right, no overlap
    for c in set(counts):
        holding = [b for b in bars if b.first <= c <= b.last]
        assert len(holding) == 1, (c, bars)
    for b in bars:
        inside = [c for c in counts if b.first <= c <= b.last]
        assert b.rows == len(inside) > 0
        assert b.over == (b.first > cutoff) and all((c > cutoff) == b.over for c in inside), (b, cutoff)
    return bars


def test_short_rows_under_a_long_cutoff_are_one_bar_within_it_from_zero():
    """40 rows of ~20 tokens and a cutoff of 2048: nothing is over the cutoff, and nothing is drawn below 0."""
    counts = [18 + i % 5 for i in range(40)]
    bars = _check_bins(counts, 2048)
    assert not any(b.over for b in bars) and sum(b.rows for b in bars) == 40
    assert bars[0].first >= 0


def test_rows_exactly_at_the_cutoff_are_within_it():
    counts = [16] * 5 + [17] * 2 + [3] * 4
    bars = _check_bins(counts, 16)
    assert sum(b.rows for b in bars if not b.over) == 9 and sum(b.rows for b in bars if b.over) == 2
    bars = _check_bins([64] * 10, 64)  # every row at the cutoff: 0 truncated, no bar over it
    assert not any(b.over for b in bars)


@pytest.mark.parametrize("seed", range(30))
def test_every_row_in_one_bar_on_its_side(seed):
    rng = random.Random(seed)
    counts = [rng.randint(0, rng.choice([30, 300, 5000])) for _ in range(rng.randint(1, 400))]
    cutoff = rng.choice([0, 1, 7, 16, 64, 256, 1024, max(counts)])
    bars = _check_bins(counts, cutoff)
    assert len(bars) <= histogram.TARGET_BINS + 2


def test_ticks_are_whole_numbers_for_a_single_length():
    bars = histogram.bins([14] * 30, 16)
    assert len(bars) == 1
    root = ET.fromstring(histogram.svg(bars, 16, SIDES, WORDS).split('<div class="hist-legend">')[0])
    labels = [t.text for t in root.iter(f"{NS}text") if t.get("class") in ("x-tick", "y-tick")]
    assert labels and all(label.isdigit() for label in labels), labels
    assert "14" in labels or "16" in labels


def _drawn(counts: list[int], cutoff: int) -> tuple[list[dict], float | None]:
    svg = histogram.svg(histogram.bins(counts, cutoff), cutoff, SIDES, WORDS).split('<div class="hist-legend">')[0]
    root = ET.fromstring(svg)
    rects = [
        {
            "x": float(r.get("x")),
            "right": float(r.get("x")) + float(r.get("width")),
            "fill": r.get("fill"),
            "tip": r.find(f"{NS}title").text,
        }
        for r in root.iter(f"{NS}rect")
    ]
    lines = [float(line.get("x1")) for line in root.iter(f"{NS}line") if line.get("class") == "cutoff"]
    return rects, (lines[0] if lines else None)


def test_svg_bars_in_their_colour_on_their_side_of_the_cutoff_line():
    rng = random.Random(3)
    counts = [rng.randint(5, 60) for _ in range(300)] + [26] * 7
    rects, line = _drawn(counts, 26)
    assert line is not None
    within = [r for r in rects if r["fill"] == SIDES[0][1]]
    over = [r for r in rects if r["fill"] == SIDES[1][1]]
    assert within and over and len(within) + len(over) == len(rects)
    assert all(r["right"] <= line + 0.01 for r in within) and all(r["x"] >= line - 0.01 for r in over)
    rows = {"within": 0, "over": 0}
    for r in rects:  # the tooltips say the lengths and rows a person reads on hover
        first, last, n = (int(x) for x in r["tip"].replace("–", " ").replace(":", " ").split() if x.isdigit())
        side = "over" if r["fill"] == SIDES[1][1] else "within"
        rows[side] += n
        assert n == sum(first <= c <= last for c in counts)
    assert rows == {"within": sum(c <= 26 for c in counts), "over": sum(c > 26 for c in counts)}


def test_lengths_frame_agrees_with_its_note(demo_paths):
    """The page's own bars (data.lengths) count the rows its note counts as truncated, at a cutoff some rows equal."""
    name, model = demo_paths["datasets"][0], demo_paths["model_dir"]
    rows = data.head(name)[0]
    counts = token_lengths("auto", model, rows[: data.LENGTHS_ROWS])
    cutoff = sorted(counts)[len(counts) // 2]  # the median: rows at exactly the cutoff exist
    frame, note = data.lengths(name, model, "auto", cutoff)
    over = frame[frame["cutoff"] == "over cutoff"]
    truncated = sum(c > cutoff for c in counts)
    assert int(over["rows"].sum()) == truncated and f"({truncated} rows)" in note
    assert all(over["first"] > cutoff) and all(frame[frame["cutoff"] == "within cutoff"]["last"] <= cutoff)
    assert data.hist_html(frame, cutoff).count('class="bar"') == len(frame)
