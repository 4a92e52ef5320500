"""The registry heals, the queue always moves, a frozen run is said and stopped at once, a full disk is named
(issue 18, items 4, 5 and 7).

Real runs throughout: the demo trainer, a real merge, command runs, each under the detached wrapper; the CLI and the
studio are started as the user starts them (``python -m engine.cli ...``).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from engine.core import events, workspace
from engine.runs import processes, run_end, store, watchdog
from engine.runs import registry as runs
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
wait_for = functools.partial(helpers.wait_for, timeout=180.0, every=0.1)


@pytest.fixture
def home(demo_paths, run_registry) -> Path:
    return run_registry


def spec_data(demo_paths, steps: int, **train) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update({"max_steps": steps, "logging_steps": 1, "save_steps": 1000, **train})
    data["data"]["max_samples"] = 64
    data["output"]["report_to"] = ["none"]
    return data


def cli(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "STUDIO_HOME": str(home)}
    return subprocess.run(
        [PY, "-m", "engine.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def snapshot() -> dict[str, tuple]:
    return {r.id: (r.status, r.name, r.kind, tuple(r.tags)) for r in runs.list_runs()}


def wait_flag(flag: Path) -> list[str]:
    """A command run that ends when ``flag`` exists (waits on a condition, not a time)."""
    return [PY, "-c", f"import os,time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.05)"]


# ----------------------------------------------------------------------------------------------- item 4
def test_damaged_or_missing_registry_is_kept_aside_and_rebuilt(home, demo_paths, tally, tmp_path):
    """Runs of every kind and end (a completed training, its merge, a failed command, a run taken off the queue);
    then the registry truncated (CLI), overwritten with garbage (studio start), deleted (CLI): each time the CLI and
    the studio start, the old file is kept aside, every run comes back with its status, name and tags."""
    from engine.export import merge_jobs
    from studio.tabs import runs as runs_tab

    trained = runs.submit(spec_data(demo_paths, 2), name="trained", tags=["keep"])
    wait_for(lambda: runs.get(trained).status != "running" and runs.get(trained).status != "queued")
    assert runs.get(trained).status == "completed", runs.get(trained).reason
    merge = merge_jobs.merge([runs.get(trained).output_dir], str(tmp_path / "merged"))
    assert merge["state"] == "finished", merge
    failed = runs.submit_command([PY, "-c", "import sys; sys.exit(3)"], name="exits-3")
    wait_for(lambda: runs.get(failed).status == "failed")
    # A runner schedules the queue after it records its run's end: once they are gone, nothing starts the queued run
    # below before it is taken off (CI saw it running: the failed command's runner started it first).
    from engine.runs import processes

    wait_for(lambda: not any(processes.runner_alive(runs.get(r)) for r in (trained, failed, merge["run_id"])))
    removed = runs.submit_command([PY, "-c", "print(1)"], name="taken-off", start=False)
    runs.stop(removed)
    before = snapshot()
    assert {s[0] for s in before.values()} == {"completed", "failed", "stopped"} and len(before) == 4
    db = workspace.registry_path()

    def aside() -> list[Path]:
        return sorted(db.parent.glob("registry.db.corrupt-*[0-9]"))

    # truncated: `studio runs list`
    size = db.stat().st_size
    os.truncate(db, min(20000, size // 2))
    done = cli("runs", "list", "--json", home=home)
    listed = {r["id"]: r for r in json.loads(done.stdout or "[]")} if done.returncode == 0 else {}
    tally.check(
        "registry::truncated -> `runs list` works, runs rebuilt with their statuses",
        done.returncode == 0 and {k: v["status"] for k, v in listed.items()} == {k: v[0] for k, v in before.items()},
        done.stderr[-2000:],
    )
    tally.check("registry::truncated -> kept aside, said", len(aside()) == 1 and "kept aside" in done.stderr, "")
    assert snapshot() == before

    # garbage: `studio webui` starts, says so, and the Runs tab shows it
    with open(db, "r+b") as fh:
        fh.write(os.urandom(4096))
    port = helpers_free_port()
    log = tmp_path / "webui.log"
    env = {**os.environ, "STUDIO_HOME": str(home), "STUDIO_WATCHDOG_S": "1"}
    env.pop("STUDIO_AUTH", None)
    proc = subprocess.Popen(
        [PY, "-m", "engine.cli", "webui", "--host", "127.0.0.1", "--port", str(port), "--no-demo"],
        cwd=ROOT,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(lambda: proc.poll() is not None or "serving on" in log.read_text(), timeout=180)
        text = log.read_text()
        tally.check(
            "registry::garbage -> the studio starts and prints the notice",
            proc.poll() is None and "was damaged" in text and "rebuilt from 4 run folder(s)" in text,
            text[-2000:],
        )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    tally.check("registry::garbage -> kept aside", len(aside()) == 2, str(aside()))
    assert snapshot() == before
    notice = runs_tab.registry_notice("en")
    tally.check("registry::Runs tab shows the notice", "was damaged" in notice and str(aside()[-1]) in notice, notice)
    assert "已损坏" in runs_tab.registry_notice("zh")

    # deleted: `studio runs show` still knows every run
    for path in db.parent.glob("registry.db*"):
        if "corrupt" not in path.name:
            path.unlink()
    done = cli("runs", "show", trained, home=home)
    tally.check(
        "registry::deleted -> rebuilt from the run folders",
        done.returncode == 0 and "completed" in done.stdout and "was missing" in done.stderr,
        done.stdout + done.stderr,
    )
    after = snapshot()
    tally.check("registry::deleted -> statuses, names and tags as before", after == before, f"{after} != {before}")
    merged = [r for r in runs.list_runs() if "merge" in r.tags]
    assert len(merged) == 1 and merge_jobs.MergeJob(merged[0].id).poll()["state"] == "finished"
    assert "was missing" in runs_tab.registry_notice("en")


def helpers_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------- item 5
def test_queue_moves_after_the_runner_is_sigkilled(home, demo_paths, tally, tmp_path):
    """Training A runs, B and C wait (one CPU slot). A's wrapper is SIGKILLed (its trainer finishes alone): the
    studio's watchdog thread starts B with no new submit. B's wrapper is SIGKILLed too: `studio runs list` starts C."""
    flag = tmp_path / "b-may-end"
    a = runs.submit(spec_data(demo_paths, 6), name="A")
    b = runs.submit_command(wait_flag(flag), name="B")
    c = runs.submit_command([PY, "-c", "print('C ran')"], name="C")
    rec = wait_for(lambda: (r := runs.get(a)).runner_pid and processes.runner_alive(r) and r.pid and r)
    os.kill(rec.runner_pid, signal.SIGKILL)
    dog = watchdog.Watchdog(0.5).start()
    try:
        started = wait_for(lambda: runs.get(b, refresh_status=False).status == "running", timeout=240)
    finally:
        dog.stop()
    tally.check("queue::runner SIGKILL -> the watchdog starts the next run", started, "")
    tally.check(
        "queue::the orphaned trainer's run still reads completed",
        runs.get(a).status == "completed",
        runs.get(a).reason[-1000:],
    )
    rec = wait_for(lambda: (r := runs.get(b)).runner_pid and processes.runner_alive(r) and r)
    os.kill(rec.runner_pid, signal.SIGKILL)
    flag.write_text("go")
    wait_for(lambda: not store.run_processes(b))
    assert runs.get(c, refresh_status=False).status == "queued"

    def listed() -> bool:
        assert cli("runs", "list", home=home).returncode == 0
        return runs.get(c, refresh_status=False).status != "queued"

    tally.check("queue::`studio runs list` reaps and starts the next run", wait_for(listed, timeout=60), "")
    wait_for(lambda: runs.get(c).status == "completed", timeout=60)
    assert "C ran" in runs.log_tail(c)


# ----------------------------------------------------------------------------------------------- item 5: stalls
def test_frozen_trainer_reads_stalled_and_stop_returns_at_once(home, demo_paths, tally, monkeypatch):
    """SIGSTOP the trainer: past N x its own step time (and the floor) the Runs tab, the dashboard and `runs list`
    say "stalled (no progress for ...)"; the page's Stop returns at once and the run ends stopped in the
    background."""
    from studio.tabs import dashboard
    from studio.tabs import runs as runs_tab

    monkeypatch.setenv("STUDIO_STALL_FLOOR", "3")
    monkeypatch.setenv("STUDIO_STALL_FACTOR", "2")
    monkeypatch.setenv("STUDIO_STOP_GRACE", "60")
    rid = runs.submit(spec_data(demo_paths, 5000), name="frozen")
    rec = runs.get(rid)
    wait_for(lambda: sum(e["type"] == "log" for e in events.read_all(rec.events_path)) >= 3)
    frozen = store.run_processes(rid)
    try:
        for proc in frozen:
            proc.send_signal(signal.SIGSTOP)
        assert watchdog.stalled_for(runs.get(rid)) is None  # it just logged
        idle = wait_for(lambda: watchdog.stalled_for(runs.get(rid)), timeout=120)
        rows: list[str] = []  # the table takes its own look at the run (a busy machine: a moment later)

        def table_says_stalled() -> bool:
            rows.append(str(runs_tab.table("en").set_index("id").loc[rid]["status"]))
            return rows[-1].startswith("stalled (no progress for ")

        try:
            ok = bool(wait_for(table_says_stalled, timeout=90, every=1.0))
        except AssertionError:
            ok = False
        tally.check("stall::SIGSTOPped trainer -> Runs tab says stalled", ok, rows[-1])
        assert "停滞" in str(runs_tab.table("zh").iloc[0].tolist())
        assert dashboard.run_status(rid).startswith("stalled")
        said: list[str] = []  # a second process reads the run's files on its own clock: it may look a moment later

        def listed_stalled() -> bool:
            said.append(cli("runs", "list", home=home).stdout)
            return "stalled (no progress" in said[-1]

        try:
            ok = bool(wait_for(listed_stalled, timeout=90, every=1.0))
        except AssertionError:
            ok = False
        tally.check("stall::`runs list` says stalled", ok, said[-1])
        assert idle >= 3

        t0 = time.time()
        msg = runs_tab.act("stop", rid)
        took = time.time() - t0
        tally.check("stall::Stop on a frozen run returns at once", took < 5.0 and rid in msg, f"{took:.1f}s {msg}")
        end = wait_for(lambda: (r := runs.get(rid)).status != "running" and r, timeout=120)
        tally.check("stall::the frozen run ends stopped in the background", end.status == "stopped", end.reason)
        wait_for(lambda: not any(t.name == f"stop-{rid}" for t in threading.enumerate()), timeout=60)
    finally:
        for proc in frozen:
            try:
                proc.send_signal(signal.SIGCONT)
            except psutil.Error:
                pass
        runs.stop(rid, grace_s=10)


# ----------------------------------------------------------------------------------------------- item 7
def _tmpfs(path: Path, size: str) -> str | None:
    """Mount a size-limited tmpfs; the reason when it cannot be done here."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False, capture_output=True, text=True
    )
    return None if done.returncode == 0 else f"mount -t tmpfs refused: {done.stderr.strip()[:200]}"


def test_disk_full_under_studio_home_is_named(demo_paths, tally, tmp_path, monkeypatch):
    """$STUDIO_HOME on a 3 MiB tmpfs: the first checkpoint fills it. `studio train` ends with the named cause (no
    sqlite3 traceback), exit.json holds it, and the run's reason says 'disk full', not that its wrapper was
    killed."""
    mnt = tmp_path / "small-home"
    why = _tmpfs(mnt, "3m")
    if why:
        pytest.skip(why)
    try:
        monkeypatch.setenv("STUDIO_HOME", str(mnt))
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(spec_data(demo_paths, 6, save_steps=2, save_total_limit=20)))
        done = cli("train", str(spec), home=mnt, timeout=300)
        output = done.stdout + done.stderr
        tally.check(
            "disk::`studio train` on a full disk -> named cause, no sqlite traceback",
            done.returncode == 1 and "disk full" in output and "sqlite3.OperationalError" not in output,
            output[-3000:],
        )
        (rdir,) = list((mnt / "runs").iterdir())
        ex = run_end.read_exit(rdir)
        last = events.last_event(rdir / "events.jsonl", events.TERMINAL_TYPES)
        tally.check(
            "disk::exit.json and a failed event with cause 'disk' written",
            ex is not None and last is not None and last["payload"].get("cause") == "disk",
            f"{ex} {last}",
        )
        rec = runs.list_runs()[0]
        tally.check(
            "disk::the run's reason says disk full, not a killed wrapper",
            rec.status == "failed" and "disk full" in rec.reason and "wrapper was killed" not in rec.reason,
            rec.reason[:500],
        )
    finally:
        for rec in runs.list_runs(refresh_status=False):
            if rec.active:
                runs.stop(rec.id, grace_s=5)
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)
