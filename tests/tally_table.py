"""The reliability suite's table of cases (issue 9): tried / passed counts and notes, kept across a test session.

``tests/reliability/conftest.py`` fills it (one row per test, plus sub-cases from the ``tally`` fixture); the summary
is written by ``tests/conftest.py``, the conftest every pytest process loads. Under pytest-xdist the table of each
worker travels to the controller in ``workeroutput`` at the worker's end and is added there (``merge``), so the
summary counts every worker's cases.
"""

from __future__ import annotations

import json
from collections import defaultdict

TABLE: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # case -> [tried, passed]
NOTES: dict[str, str] = {}
KEY = "studio_reliability_table"


def dump() -> str:
    return json.dumps({"table": dict(TABLE), "notes": NOTES})


def merge(text: str) -> None:
    data = json.loads(text)
    for case, (tried, passed) in data["table"].items():
        TABLE[case][0] += tried
        TABLE[case][1] += passed
    NOTES.update(data["notes"])


def write_summary(tr, soak: bool) -> None:
    if not TABLE and not NOTES:
        return
    tr.section("reliability summary (issue 9)" + (" — soak" if soak else ""))
    names = sorted(set(TABLE) | set(NOTES))
    width = max(len(n) for n in names)
    tr.write_line(f"{'case'.ljust(width)}  {'tried':>6}  {'passed':>6}  note")
    total_t = total_p = 0
    for name in names:
        tried, passed = TABLE.get(name, [0, 0])
        total_t += tried
        total_p += passed
        flag = "" if tried == passed else "  <-- FAILED"
        tr.write_line(f"{name.ljust(width)}  {tried:>6}  {passed:>6}  {NOTES.get(name, '')}{flag}")
    tr.write_line(f"{'TOTAL'.ljust(width)}  {total_t:>6}  {total_p:>6}")
