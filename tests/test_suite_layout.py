"""The suite's own layout for pytest-xdist (tests/xdist_groups.py): the files that use the session's Slurm cluster
are one work unit, and the units are handed out longest first."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from tests import xdist_groups

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_on_the_slurm_cluster_is_in_the_one_unit():
    users = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"\bslurm_cluster\b", p.read_text())
    }
    assert users == set(xdist_groups.SLURM_FILES), "add the file to xdist_groups.SLURM_FILES (or remove it there)"


def test_every_test_file_has_its_seconds_in_the_table():
    """A file missing from tests/file_seconds.json is costed at 5 s a test and handed out among the last: twelve were
    missing, two of them among the longest (Ray's two-node run, the team's browser test), and ran on as the tail."""
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")}
    missing = sorted(files - set(xdist_groups.file_seconds()))
    assert not missing, (
        "add the seconds of these files to tests/file_seconds.json (measured: pytest --junitxml=J FILE, or a full "
        f"run's report with python -m tests.xdist_groups J): {missing}"
    )


def test_units_go_longest_first_keeping_each_files_order(monkeypatch):
    monkeypatch.setattr(
        xdist_groups,
        "file_seconds",
        lambda: {"tests/a.py": 10.0, "tests/engine/test_slurm.py": 30.0, "tests/b.py": 50.0},
    )
    ids = [
        "tests/a.py::t1",
        "tests/a.py::t2",
        "tests/engine/test_slurm.py::s1",
        "tests/b.py::t1",
        "tests/e2e/test_e2e_slurm.py::e1",  # not in the table: 5 s per test, added to the slurm unit's 30
        "tests/c.py::t1",  # not in the table: 5 s
        "tests/engine/test_cli_targets.py::c1",
        "tests/b.py::t2",
    ]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    got = [i.nodeid for i in xdist_groups.longest_first(items)]
    assert got == [
        "tests/b.py::t1",
        "tests/b.py::t2",
        "tests/engine/test_slurm.py::s1",
        "tests/e2e/test_e2e_slurm.py::e1",
        "tests/engine/test_cli_targets.py::c1",
        "tests/a.py::t1",
        "tests/a.py::t2",
        "tests/c.py::t1",
    ]
    assert {xdist_groups.unit_of(i) for i in got[2:5]} == {"slurm"}


def test_the_table_is_read_from_a_junit_report(tmp_path, monkeypatch):
    monkeypatch.setattr(xdist_groups, "TABLE", tmp_path / "t.json")
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.engine.test_merge" name="a" time="2.5"/>'
        '<testcase classname="tests.engine.test_merge" name="b" time="1.0"/>'
        '<testcase classname="tests.e2e.test_e2e_tabs.TestTabs" name="c" time="4"/>'
        "</testsuite></testsuites>"
    )
    assert xdist_groups.update_from_junit(str(xml)) == {
        "tests/e2e/test_e2e_tabs.py": 4.0,
        "tests/engine/test_merge.py": 3.5,
    }
    assert xdist_groups.file_seconds() == {"tests/e2e/test_e2e_tabs.py": 4.0, "tests/engine/test_merge.py": 3.5}
