"""Reliability and security suite (issue 9): shared fixtures and the summary table printed at the end of a session.

Every test of this folder is one *case* (tried / passed by its outcome); property tests also count each generated
example as a try of their case through the ``tally`` fixture. The table (``tests/tally_table.py``) is printed by
``tests/conftest.py`` after every session that ran at least one of these tests, with every xdist worker's rows.

Soak: ``STUDIO_SOAK=1`` (or ``--soak`` when pytest is started on this folder) runs the long variants: 1,000+ fuzzed
dataset files, minutes of load, more kill points.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tally_table import NOTES as _NOTES
from tests.tally_table import TABLE as _TABLE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def soak() -> bool:
    return os.environ.get("STUDIO_SOAK") == "1"


def pytest_addoption(parser):  # only honoured when pytest starts on this folder; STUDIO_SOAK=1 works everywhere
    try:
        parser.addoption("--soak", action="store_true", default=False, help="run the long reliability soak variants")
    except ValueError:  # already registered by another conftest
        pass


def pytest_configure(config):
    try:
        if config.getoption("--soak"):
            os.environ["STUDIO_SOAK"] = "1"
    except ValueError:
        pass


class Tally:
    """Counts tries and passes of named sub-cases; ``check`` records and asserts in one go."""

    def record(self, case: str, ok: bool, note: str = "") -> bool:
        row = _TABLE[case]
        row[0] += 1
        row[1] += int(bool(ok))
        if note:
            _NOTES[case] = note
        return ok

    def check(self, case: str, ok: bool, message: str = "") -> None:
        self.record(case, ok)
        assert ok, f"{case}: {message}"

    def note(self, case: str, text: str) -> None:
        _NOTES[case] = text


@pytest.fixture(scope="session")
def tally() -> Tally:
    return Tally()


def _case_name(item: pytest.Item) -> str:
    module = Path(str(item.fspath)).stem.removeprefix("test_")
    return f"{module}::{item.name.removeprefix('test_')}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not str(item.fspath).startswith(str(HERE)):
        return
    if report.when == "call" or (report.when == "setup" and (report.failed or report.skipped)):
        row = _TABLE[_case_name(item)]
        if report.skipped:
            _NOTES.setdefault(
                _case_name(item),
                "skipped: " + str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)[:80],
            )
            return
        row[0] += 1
        row[1] += int(report.passed)
