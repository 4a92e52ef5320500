"""A full disk (issue 30, item 4), on a small tmpfs mounted under the test's folder ($STUDIO_HOME on it).

At 0 bytes free `studio train` refuses in one line with the figure and leaves no run folder; a run that ends while
another process keeps the disk full records its true end (exit code, end time) as soon as there is room, with no
empty ``exit.tmp`` left as the truth; `studio runs delete` on a full disk frees the run's files and then forgets it.
Real commands, detached wrappers and CLI processes; the disk is filled by a real writer.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from engine.runs import processes, records, run_end
from engine.runs import registry as runs
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
wait_for = functools.partial(helpers.wait_for, timeout=120.0, every=0.1)

# Fills the disk under argv[1] and keeps it full: whatever space appears is taken again at once, until SIGTERM.
FILLER = """
import sys, time
path, beat, full = sys.argv[1], sys.argv[2], False
with open(path, "ab", buffering=0) as fh:
    while True:
        try:
            fh.write(bytes(65536))
        except OSError:
            try:
                fh.write(bytes(4096))
            except OSError:
                if not full:
                    open(beat, "w").close()
                    full = True
                time.sleep(0.002)
"""


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs refused here: {done.stderr.decode(errors='replace').strip()[:200]}")


@pytest.fixture
def small_home(tmp_path, monkeypatch):
    """$STUDIO_HOME on an 8 MiB tmpfs; every run of the test stopped and the tmpfs unmounted, whatever happened."""
    mnt = tmp_path / "small-home"
    mount_tmpfs(mnt, "8m")
    monkeypatch.setenv("STUDIO_HOME", str(mnt))
    monkeypatch.setenv("STUDIO_CPU_SLOTS", "1")
    try:
        yield mnt
    finally:
        for filler in mnt.glob("filler*"):
            filler.unlink(missing_ok=True)
        for rec in runs.list_runs(refresh_status=False):
            if rec.active:
                runs.stop(rec.id, grace_s=2)
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def fill(mnt: Path) -> subprocess.Popen:
    """A writer (not a run: no STUDIO_RUN_ID) that keeps the disk full; returns once it is full."""
    env = {k: v for k, v in os.environ.items() if k != processes.MARKER}
    beat = mnt.parent / "filler.beat"
    proc = subprocess.Popen([PY, "-c", FILLER, str(mnt / "filler"), str(beat)], env=env, start_new_session=True)
    wait_for(lambda: free_bytes(mnt) < 65536 and beat.exists())
    return proc


def stop_filling(proc: subprocess.Popen, mnt: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    for filler in mnt.glob("filler*"):
        filler.unlink()


def cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "STUDIO_HOME": str(home)}
    return subprocess.run(
        [PY, "-m", "engine.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def raw_row(home: Path, run_id: str) -> tuple | None:
    conn = sqlite3.connect(str(home / "registry.db"))
    try:
        return conn.execute("SELECT status, exit_code, started, ended FROM runs WHERE id = ?", (run_id,)).fetchone()
    finally:
        conn.close()


def test_train_on_a_full_disk_says_one_line_and_leaves_no_folder(small_home, demo_paths, tally, tmp_path):
    spec = tmp_path / "spec.yaml"
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["output"]["report_to"] = ["none"]
    spec.write_text(yaml.safe_dump(data))
    assert cli("runs", "list", home=small_home).returncode == 0  # the registry exists, as in any used workspace
    filler = fill(small_home)
    try:
        outs = [cli("train", str(spec), home=small_home) for _ in range(3)]
    finally:
        stop_filling(filler, small_home)
    for n, done in enumerate(outs):
        said = (done.stdout + done.stderr).strip()
        tally.check(
            f"disk-full::`studio train` attempt {n + 1} -> one line with the figure",
            done.returncode == 1
            and len(said.splitlines()) == 1
            and "Traceback" not in said
            and " free under " in said,
            said[-3000:],
        )
    left = sorted(p.name for p in (small_home / "runs").iterdir()) if (small_home / "runs").exists() else []
    tally.check("disk-full::no run folder left behind", left == [], str(left))


def test_a_run_ending_on_a_full_disk_records_its_true_end(small_home, tally):
    """The run's command exits 3 while a writer keeps the disk full: its wrapper holds the end (exit.pending) and
    records it once there is room: exit code 3, the end time when it ended, exit.json whole, no exit.tmp."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: sys.exit(3))\n"
        "open(sys.argv[1], 'w').close()\n"  # the handler is in place: a signal before it would end the run as -10
        "while True: time.sleep(0.05)\n"
    )
    rid = runs.submit_command([PY, "-c", code, "{run_dir}/handler.ready"], name="ends-on-a-full-disk")
    rec = wait_for(lambda: (r := runs.get(rid)).pid and processes.runner_alive(r) and r)
    rdir = Path(rec.run_dir)
    wait_for(lambda: (rdir / ".space-reserve").is_file() and (rdir / "handler.ready").is_file())
    filler = fill(small_home)
    try:
        os.kill(rec.pid, signal.SIGUSR1)
        ended_by = time.time()
        runner = psutil.Process(rec.runner_pid)
        # the wrapper tried: it holds the end (exit.pending) or, having found no room and no way to wait, is gone
        wait_for(lambda: (rdir / "exit.pending").exists() or not runner.is_running() or runner.status() == "zombie")
        tally.check(
            "disk-full::no empty exit.tmp is left as the truth",
            not (rdir / "exit.tmp").exists(),
            str(sorted(p.name for p in rdir.iterdir())),
        )
        freed_at = time.time()
    finally:
        stop_filling(filler, small_home)
    row = wait_for(lambda: (r := raw_row(small_home, rid)) and r[0] != "running" and r)
    final = runs.get(rid)
    ex = run_end.read_exit(rdir) or {}
    tally.check(
        "disk-full::the run's end is recorded as it happened (exit code 3, command's words)",
        row[:2] == ("failed", 3) and "exited with code 3" in final.reason and ex.get("returncode") == 3,
        f"{row} {final.reason[:300]} {ex}",
    )
    tally.check(
        "disk-full::its recorded end is when it ended, not when someone looked",
        ended_by - 1.0 <= row[3] <= freed_at,
        f"ended {row[3]} signalled {ended_by} freed {freed_at}",
    )
    assert not (rdir / "exit.tmp").exists() and not (rdir / "exit.pending").exists()


def test_delete_on_a_full_disk_frees_the_files_first(small_home, tally):
    rid = runs.submit_command([PY, "-c", "open('{run_dir}/big', 'wb').write(b'x' * (2 << 20))"], name="big")
    rec = wait_for(lambda: (r := runs.get(rid)).status != "running" and r.status != "queued" and r)
    assert rec.status == "completed", rec.reason
    rdir = Path(rec.run_dir)
    filler = fill(small_home)
    filler.send_signal(signal.SIGTERM)  # the disk stays full: its files stay
    filler.wait(30)
    before = free_bytes(small_home)
    assert before < 65536
    try:
        done = cli("runs", "delete", rid, "--yes", home=small_home)
        after = free_bytes(small_home)
    finally:
        for f in small_home.glob("filler*"):
            f.unlink()
    said = done.stdout + done.stderr
    tally.check(
        "disk-full::`studio runs delete` on a full disk works, no traceback",
        done.returncode == 0 and "Traceback" not in said and f"removed {rdir}" in said,
        said[-3000:],
    )
    tally.check(
        "disk-full::the run's files are freed and the run forgotten",
        not rdir.exists() and raw_row(small_home, rid) is None and after - before >= 2 << 20,
        f"{rdir.exists()} {raw_row(small_home, rid)} free {before} -> {after}",
    )


def test_a_run_folder_half_made_by_a_failing_write_is_removed(tmp_path, demo_paths, monkeypatch, tally):
    """Bytes to spare but one inode left (a tmpfs with nr_inodes): the check passes, the run folder is made, its
    spec.yaml cannot be: submit says so in one line and the half-made folder is gone."""
    mnt = tmp_path / "few-inodes"
    mount_tmpfs(mnt, "8m,nr_inodes=64")
    monkeypatch.setenv("STUDIO_HOME", str(mnt))
    try:
        assert runs.list_runs() == []  # the registry and the workspace's folders exist
        (mnt / "runs").mkdir(exist_ok=True)
        held = sqlite3.connect(str(mnt / "registry.db"))  # its -wal and -shm stay while a connection is open
        held.execute("SELECT count(*) FROM runs").fetchone()
        taken = []
        while True:
            try:
                (mnt / f"inode-{len(taken)}").touch()
            except OSError:
                break
            taken.append(mnt / f"inode-{len(taken)}")
        taken.pop().unlink()  # exactly one inode left: the run folder takes it
        data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
        data["output"]["report_to"] = ["none"]
        with pytest.raises(records.RunsError) as info:
            runs.submit(data, start=False)
        said = str(info.value)
        left = sorted(p.name for p in (mnt / "runs").iterdir())
        tally.check(
            "disk-full::a half-made run folder is removed, the cause said in one line",
            left == [] and "the run was not created: disk full" in said and len(said.splitlines()) == 1,
            f"{left} {said}",
        )
        held.close()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True)
