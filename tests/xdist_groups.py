"""How the suite is spread over pytest-xdist workers (``scripts/test.sh`` runs ``-n 2 --dist loadfile``).

Work units are whole test files, so a file's module-scoped set-up (a trained run, a studio server) is made once, on
one worker, never on both; the files that use the session's one-host Slurm cluster (``SLURM_FILES``) form one unit,
so one cluster serves them all. Units go to the workers longest first (``FILE_SECONDS``, seconds per file measured
on the 2-core machine; a file not in it counts ``DEFAULT_TEST_SECONDS`` per test), so the last unit to start is a
short one and both workers end close together.

Not xdist's own ``--dist loadgroup`` with ``xdist_group`` marks: with pytest 9.2 and xdist 3.8 its group suffix on
the test ids is lost and every test went to either worker (each then built its own copy of a file's set-up).

Refresh the table after a full run with ``--junitxml=J``: ``python -m tests.xdist_groups J``.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE = HERE / "file_seconds.json"
SLURM_FILES = frozenset(
    {"tests/engine/test_slurm.py", "tests/engine/test_cli_targets.py", "tests/e2e/test_e2e_slurm.py"}
)
DEFAULT_TEST_SECONDS = 5.0


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The work unit a test belongs to: its file, or "slurm" for the cluster's files."""
    path = file_of(nodeid)
    return "slurm" if path in SLURM_FILES else path


def file_seconds() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(TABLE.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_first(items: list) -> list:
    """``items`` (pytest items) reordered so the units with the most expected seconds come first; the order within
    a file is kept (stable sort)."""
    known = file_seconds()
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[file_of(item.nodeid)] += 1
    unit_s: dict[str, float] = defaultdict(float)
    for path, n in counts.items():
        unit_s[unit_of(path)] += known.get(path, n * DEFAULT_TEST_SECONDS)
    return sorted(items, key=lambda item: -unit_s[unit_of(item.nodeid)])


def make_scheduler(config, log):
    """A ``LoadScopeScheduling`` whose scopes are ``unit_of`` and whose queue keeps the workers' collection order
    (``longest_first``, applied by tests/conftest.py on every worker)."""
    from xdist.scheduler import LoadScopeScheduling

    class FileUnitScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep longest-first, not most-tests-first

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return FileUnitScheduling(config, log)


def update_from_junit(path: str) -> dict[str, float]:
    """Seconds per test file from a JUnit XML report (``pytest --junitxml``), written to ``file_seconds.json``."""
    import xml.etree.ElementTree as ET

    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "")
        module = name.split(".")
        # classname is the dotted module path (tests.engine.test_merge) or module.Class
        parts = [p for p in module if not p[:1].isupper()]
        seconds["/".join(parts) + ".py"] += float(case.get("time", 0) or 0)
    table = {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])}
    TABLE.write_text(json.dumps(table, indent=1) + "\n")
    return table


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.xdist_groups JUNIT_XML")
    out = update_from_junit(sys.argv[1])
    print(f"{TABLE}: {len(out)} files, {sum(out.values()) / 60:.1f} min in all")
