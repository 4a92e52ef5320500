"""The registry never forgets runs, never two runs in one slot (issue 30, item 1).

``registry.db`` is deleted under a live watchdog (what ``studio webui`` runs) and under a run's own wrapper, with a
running and a queued run: every run comes back from its folder, the queued run starts only after the running one
ended, each end is recorded by the wrapper, and a live process of a run the registry does not list holds its slot.
Real detached wrappers and command runs (one CPU slot); the CLI is started as a user starts it.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core import workspace
from engine.runs import processes, store, watchdog
from engine.runs import registry as runs
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
wait_for = functools.partial(helpers.wait_for, timeout=120.0, every=0.1)


@pytest.fixture
def home(run_registry) -> Path:
    return run_registry


def logged_wait(log: Path, flag: Path) -> list[str]:
    """A command run that writes '<run id> start <time>' to ``log``, ends when ``flag`` exists, then writes its end."""
    code = (
        "import os, time\n"
        f"log, flag = {str(log)!r}, {str(flag)!r}\n"
        "rid = os.environ['STUDIO_RUN_ID']\n"
        "open(log, 'a').write(f'{rid} start {time.time()}\\n')\n"
        "while not os.path.exists(flag): time.sleep(0.05)\n"
        "open(log, 'a').write(f'{rid} end {time.time()}\\n')\n"
    )
    return [PY, "-c", code]


def spans(log: Path) -> dict[str, list[float]]:
    """{run id: [start, end?]} from the runs' own log lines."""
    found: dict[str, list[float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        rid, what, ts = line.split()
        found.setdefault(rid, [])
        if what == "start":
            found[rid].insert(0, float(ts))
        else:
            found[rid].append(float(ts))
    return found


def remove_registry() -> None:
    """registry.db and its -wal / -shm gone at one moment: under the heal lock, so a process that saw the file missing
    cannot rebuild it half-way through (its fresh -wal, holding the rebuilt rows, would then be removed too)."""
    from engine.runs.heal import heal_lock

    db = workspace.registry_path()
    with heal_lock():
        for suffix in ("", "-wal", "-shm"):
            db.with_name(db.name + suffix).unlink(missing_ok=True)


def raw_rows() -> dict[str, tuple]:
    """The registry file as it is, read without Studio's code (which would heal it)."""
    conn = sqlite3.connect(str(workspace.registry_path()))
    try:
        return {r[0]: r[1:] for r in conn.execute("SELECT id, status, exit_code, ended FROM runs")}
    finally:
        conn.close()


def cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "STUDIO_HOME": str(home)}
    return subprocess.run(
        [PY, "-m", "engine.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def ticks(dog: watchdog.Watchdog, n: int) -> None:
    """Wait until the watchdog has looked ``n`` more times."""
    start = dog.ticks
    wait_for(lambda: dog.ticks >= start + n)


def test_registry_deleted_under_a_running_studio_loses_nothing(home, tally, tmp_path):
    """A runs, B waits; registry.db removed under the watchdog: both come back, a new submit C queues behind A; A ends:
    recorded, B starts after it. Removed again with no studio: B's wrapper records B's end and starts C."""
    go = [tmp_path / f"{x}.go" for x in "abc"]
    try:
        _lose_the_registry_twice(tally, home, tmp_path / "spans.log", *go)
    finally:  # whatever failed, no run of this test waits on
        for flag in go:
            flag.write_text("go")


def _lose_the_registry_twice(tally, home: Path, log: Path, go_a: Path, go_b: Path, go_c: Path) -> None:
    a = runs.submit_command(logged_wait(log, go_a), name="A", tags=["first"])
    b = runs.submit_command(logged_wait(log, go_b), name="B")
    wait_for(lambda: (r := runs.get(a)).runner_pid and processes.runner_alive(r))
    assert runs.get(b).status == "queued"
    dog = watchdog.Watchdog(0.2).start()
    try:
        remove_registry()
        ticks(dog, 3)
        wanted = {a: ("running", "A", ("first",)), b: ("queued", "B", ())}

        def listing() -> dict:
            return {r.id: (r.status, r.name, tuple(r.tags)) for r in runs.list_runs()}

        try:  # every look of the watchdog heals what it finds; the listing is whole once it has caught up
            helpers.wait_for(lambda: listing() == wanted, timeout=60.0, every=0.2)
        except AssertionError:
            pass  # the check below says what was listed
        listed = listing()
        tally.check(
            "lost-registry::deleted under the watchdog -> both runs back, statuses kept",
            listed == wanted,
            str(listed),
        )
        done = cli("runs", "list", "--json", home=home)
        shown = {r["id"]: r["status"] for r in json.loads(done.stdout or "[]")} if done.returncode == 0 else {}
        tally.check("lost-registry::`studio runs list` lists them", shown == {a: "running", b: "queued"}, done.stderr)
        c = runs.submit_command(logged_wait(log, go_c), name="C")  # a new submit must queue behind A
        ticks(dog, 3)
        tally.check(
            "lost-registry::the queued run and a new submit wait for the running one",
            set(spans(log)) == {a} and runs.get(c).status == "queued" and not store.run_processes(b),
            str(spans(log)),
        )
        go_a.write_text("go")
        rec_a = wait_for(lambda: (r := runs.get(a)).status != "running" and r)
        wait_for(lambda: b in spans(log))
    finally:
        dog.stop()
    s = spans(log)
    tally.check(
        "lost-registry::the finished run's end is recorded, the next starts after it",
        rec_a.status == "completed" and rec_a.exit_code == 0 and s[b][0] >= s[a][1] and rec_a.ended >= s[a][1],
        f"{rec_a.status} {rec_a.reason} {s}",
    )
    # deleted again with no studio at all: B's own wrapper records its end and starts C
    wait_for(lambda: (r := runs.get(b)).runner_pid and processes.runner_alive(r))
    remove_registry()
    go_b.write_text("go")
    wait_for(lambda: c in spans(log))
    rows = raw_rows()
    tally.check(
        "lost-registry::a wrapper whose run the registry lost records its end and moves the queue",
        rows.get(b, (None,))[:2] == ("completed", 0) and rows.get(a, (None,))[0] == "completed",
        str(rows),
    )
    go_c.write_text("go")
    wait_for(lambda: runs.get(c).status == "completed")
    s = spans(log)
    order = sorted(s.values())
    tally.check(
        "lost-registry::never two runs in the one slot",
        len(order) == 3 and all(len(x) == 2 for x in order) and all(p[1] <= n[0] for p, n in zip(order, order[1:])),
        str(s),
    )


def test_a_live_run_the_registry_does_not_list_holds_its_slot(home, tally, tmp_path):
    """A trainer of a run the registry lost (folder and row gone, process alive, marked STUDIO_RUN_ID): a new submit
    waits for it, and starts once it ends."""
    stray_flag, log = tmp_path / "stray.go", tmp_path / "spans.log"
    env = {**os.environ, processes.MARKER: "20200101-000000-abcdef"}
    stray = subprocess.Popen(
        [PY, "-c", f"import os, time\nwhile not os.path.exists({str(stray_flag)!r}): time.sleep(0.05)"], env=env
    )
    try:
        d = runs.submit_command(logged_wait(log, tmp_path / "d.go"), name="D")
        dog = watchdog.Watchdog(0.2).start()
        try:
            ticks(dog, 3)
            tally.check(
                "lost-registry::a live unlisted run holds the CPU slot",
                runs.get(d).status == "queued" and not log.exists(),
                runs.get(d).status,
            )
            stray_flag.write_text("go")
            stray.wait(30)
            started = wait_for(lambda: runs.get(d).status == "running" and d in spans(log))
        finally:
            dog.stop()
        tally.check("lost-registry::the queued run starts once it ended", started, "")
        (tmp_path / "d.go").write_text("go")
        wait_for(lambda: runs.get(d).status == "completed")
    finally:
        stray_flag.write_text("go")
        stray.wait(30)
