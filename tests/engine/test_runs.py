"""Run registry, queue and process supervision with small python children (pure process management).

Training runs with the real trainer are in test_runs_train.py.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from engine.core import events
from engine.runs import records, scheduler, store
from engine.runs import registry as runs
from engine.runs.scheduler import Want, plan_starts
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


@pytest.fixture
def home(run_registry, monkeypatch) -> Path:
    """A private registry per test (runs of other tests never interfere)."""
    monkeypatch.setenv("STUDIO_METRICS_INTERVAL", "0.3")
    return run_registry


wait_for = functools.partial(helpers.wait_for, timeout=30.0, every=0.1)


def sleeper(seconds: float, marker_file: Path | None = None) -> list[str]:
    code = f"import time,sys; print('start', flush=True); time.sleep({seconds}); print('done', flush=True)"
    if marker_file:
        code = (
            f"import time,os; open({str(marker_file)!r},'a').write(os.environ['STUDIO_RUN_ID']+' start %f\\n' "
            f"% time.time()); time.sleep({seconds}); open({str(marker_file)!r},'a').write("
            f"os.environ['STUDIO_RUN_ID']+' end %f\\n' % time.time())"
        )
    return [PY, "-c", code]


def no_zombie_children() -> bool:
    return not [p for p in psutil.Process().children(recursive=True) if p.status() == psutil.STATUS_ZOMBIE]


# ----------------------------------------------------------------------------------------------- allocation
class TestPlanStarts:
    def test_cpu_slots_run_in_submission_order(self):
        q = [Want("a", cpu=True), Want("b", cpu=True), Want("c", cpu=True)]
        assert plan_starts([], q, [], 1)[0] == [("a", [])]
        assert plan_starts([(True, [])], q[1:], [], 1)[0] == []
        assert plan_starts([], q, [], 2)[0] == [("a", []), ("b", [])]

    def test_a_server_takes_no_cpu_slot(self):
        q = [Want("serve", cpu=True, slot=False), Want("train", cpu=True)]
        assert plan_starts([(True, [])], q, [], 1)[0] == [("serve", [])]  # the slot is held: the server starts
        assert plan_starts([], q, [], 1)[0] == [("serve", []), ("train", [])]  # and takes none from training

    def test_gpu_never_shared_without_permission(self):
        q = [Want("a", cpu=False, count=1, ids=[0]), Want("b", cpu=False, count=1, ids=[0])]
        assert plan_starts([], q, [0, 1], 1)[0] == [("a", [0])]
        q[1].share = True
        assert plan_starts([], q, [0, 1], 1)[0] == [("a", [0]), ("b", [0])]

    def test_count_takes_free_gpus_and_waits_in_order(self):
        running = [(False, [0])]
        q = [Want("a", cpu=False, count=2), Want("b", cpu=False, count=1)]
        # a needs 2 of the 3 free... only 1,2 are free -> a starts on them; b waits (GPU 0 busy, none left)
        assert plan_starts(running, q, [0, 1, 2], 1)[0] == [("a", [1, 2])]
        # a cannot fit on one free GPU: b, submitted later, must not overtake it
        assert plan_starts(running, q, [0, 1], 1)[0] == []

    def test_waiting_explicit_run_reserves_its_gpus(self):
        running = [(False, [0])]
        q = [
            Want("a", cpu=False, count=2, ids=[0, 1]),
            Want("b", cpu=False, count=1, ids=[1]),
            Want("c", cpu=False, count=1, ids=[2]),
        ]
        assert plan_starts(running, q, [0, 1, 2], 1)[0] == [("c", [2])]

    def test_impossible_runs_are_reported(self):
        q = [Want("a", cpu=False, count=4), Want("b", cpu=False, count=1, ids=[7])]
        starts, impossible = plan_starts([], q, [0, 1], 1)
        assert starts == []
        assert "needs 4 GPUs" in impossible["a"] and "GPU [7]" in impossible["b"]


# ----------------------------------------------------------------------------------------------- registry
def test_submit_rejects_invalid_spec_before_any_process(home):
    from engine.spec.schema import SpecError

    with pytest.raises(SpecError, match="data"):
        runs.submit({"model": {"name_or_path": str(home / "missing-model")}, "data": {"datasets": ["nope"]}})
    assert runs.list_runs() == []
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_rename_tags_delete_and_refusals(home):
    rid = runs.submit_command(sleeper(30), name="long")
    wait_for(lambda: runs.get(rid).pid)
    runs.rename(rid, "renamed")
    runs.set_tags(rid, ["b", "a", "a", " "])
    rec = runs.get(rid)
    assert (rec.name, rec.tags, rec.status) == ("renamed", ["a", "b"], "running")
    with pytest.raises(records.RunsError, match="stop it first"):
        runs.delete(rid)
    assert runs.stop(rid, grace_s=5)
    assert runs.get(rid).status == "stopped"
    runs.delete(rid)
    assert not Path(rec.run_dir).exists()
    with pytest.raises(records.RunsError, match="no run with id"):
        runs.get(rid)


def test_two_processes_writing_at_once_never_corrupt(home):
    script = textwrap.dedent("""
        import sys
        from engine.runs import registry as runs
        tag = sys.argv[1]
        for i in range(60):
            rid = runs.submit_command(["true"], name=f"{tag}-{i}", start=False)
            runs.rename(rid, f"{tag}-{i}-renamed")
            runs.set_tags(rid, [tag, str(i)])
            runs.list_runs()
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([PY, "-c", script, t], env=env, cwd=ROOT) for t in ("x", "y")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    conn = sqlite3.connect(home / "registry.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    recs = runs.list_runs()
    assert len(recs) == 120 and len({r.id for r in recs}) == 120
    for r in recs:
        tag, i, _ = r.name.split("-")
        assert r.tags == sorted([tag, i]) and r.status == "queued"


# ----------------------------------------------------------------------------------------------- processes
def test_command_run_completes_detached_with_metrics_and_no_zombie(home):
    rid = runs.submit_command(sleeper(1.5), name="short")
    rec = wait_for(lambda: runs.get(rid).pid and runs.get(rid))
    # the wrapper is not our child: the studio never has to wait on it
    assert rec.runner_pid not in [p.pid for p in psutil.Process().children(recursive=True)]
    assert os.getpgid(rec.pid) == rec.pid and os.getsid(rec.pid) == rec.pid  # own session and group
    rec = wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=30)
    assert (rec.status, rec.exit_code) == ("completed", 0)
    assert json.loads((Path(rec.run_dir) / "exit.json").read_text())["returncode"] == 0
    assert "done" in runs.log_tail(rid)
    samples = [json.loads(x) for x in (Path(rec.run_dir) / "metrics.jsonl").read_text().splitlines()]
    assert len(samples) >= 2
    assert any(s["processes"] and s["rss_mib"] > 0 for s in samples)
    assert "STUDIO_FORCE_CPU" in samples[0]["gpu_note"] and all("gpu_note" not in s for s in samples[1:])
    warnings = [e for e in events.read_all(rec.events_path) if e["type"] == "warning"]
    assert len(warnings) == 1 and "CPU and RAM only" in warnings[0]["payload"]["message"]
    launch = json.loads((Path(rec.run_dir) / "launch.json").read_text())
    assert "env" not in launch and "STUDIO_RUN_ID" in launch["env_keys"]
    wait_for(
        lambda: (
            not psutil.pid_exists(rec.runner_pid) or psutil.Process(rec.runner_pid).status() != psutil.STATUS_ZOMBIE
        ),
        timeout=5,
    )
    assert no_zombie_children()


def test_secret_env_is_not_written_to_the_run_folder(home, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value_123")
    rid = runs.submit_command([PY, "-c", "import os; print(len(os.environ['HF_TOKEN']))"])
    rec = wait_for(lambda: runs.get(rid).status == "completed" and runs.get(rid))
    assert runs.log_tail(rid).strip().endswith("19")  # the child got it
    for f in Path(rec.run_dir).iterdir():
        assert "hf_secret_value_123" not in f.read_text(errors="replace"), f.name


def test_command_environment_is_explicit(home, monkeypatch):
    """A command run gets the trainer's allow-listed environment (engine.runs.launch.subprocess_env) plus the studio's
    settings and its marker, not whatever the studio happens to have: no login, no unrelated secrets."""
    from engine.machine import hardware
    from engine.runs import launch

    monkeypatch.setenv("STUDIO_AUTH", "admin:hunter2")
    monkeypatch.setenv("UNRELATED_SECRET", "s3cret")
    monkeypatch.setenv("HF_TOKEN", "hf_passed_on_purpose")
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    rid = runs.submit_command([PY, "-c", dump], name="env")
    wait_for(lambda: runs.get(rid).status == "completed")
    env = json.loads(runs.log_tail(rid, 1))
    assert "UNRELATED_SECRET" not in env and "STUDIO_AUTH" not in env
    assert not any("hunter2" in v for v in env.values())
    assert env["HF_TOKEN"] == "hf_passed_on_purpose" and env["STUDIO_RUN_ID"] == rid
    assert env["OMP_NUM_THREADS"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""  # a CPU slot: no GPU visible
    allowed = set(launch.subprocess_env("cpu", [], hardware.detect())) | {"PYTHONPATH", "STUDIO_RUN_ID"}
    allowed |= {k for k in os.environ if k.startswith("STUDIO_")}
    extra = set(env) - allowed - {"LC_CTYPE", "_"}  # set by the interpreter / shell conventions
    assert not extra, f"command run inherited {sorted(extra)}"


def test_killed_child_is_failed_with_reason_within_2s(home):
    rid = runs.submit_command(sleeper(60), name="victim")
    rec = wait_for(lambda: runs.get(rid).pid and runs.get(rid))
    wait_for(lambda: "start" in runs.log_tail(rid))
    os.kill(rec.pid, signal.SIGKILL)
    t0 = time.time()
    rec = wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=5, every=0.05)
    assert time.time() - t0 < 2.0
    assert rec.status == "failed" and "SIGKILL" in rec.reason and "start" in rec.reason  # log tail included


def test_killed_wrapper_and_child_read_failed_when_looked_at(home):
    rid = runs.submit_command(sleeper(60), name="orphan")
    rec = wait_for(lambda: runs.get(rid).pid and runs.get(rid))
    os.kill(rec.runner_pid, signal.SIGKILL)  # the wrapper dies first: nobody will write exit.json
    os.killpg(rec.pgid, signal.SIGKILL)
    wait_for(lambda: not store.run_processes(rid), timeout=5)
    t0 = time.time()
    rec = runs.get(rid)
    assert time.time() - t0 < 10.0  # no waiting on the dead wrapper (generous: a loaded CI machine)
    assert rec.status == "failed" and "without an exit record" in rec.reason


def test_stop_ends_every_process_of_the_tree(home):
    # Like torch's launcher: workers in their own sessions, one of them ignoring SIGTERM.
    worker = (
        "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('w', flush=True); time.sleep(120)"
    )
    code = textwrap.dedent(f"""
        import subprocess, sys, time
        ws = [subprocess.Popen([sys.executable, '-c', {worker!r}], start_new_session=True) for _ in range(2)]
        print('launcher', flush=True)
        for w in ws: w.wait()
    """)
    rid = runs.submit_command([PY, "-c", code], name="tree")
    wait_for(lambda: runs.log_tail(rid).count("w") >= 2 and "launcher" in runs.log_tail(rid))
    assert len(store.run_processes(rid)) == 3
    t0 = time.time()
    assert runs.stop(rid, grace_s=2) is True
    assert time.time() - t0 < 15
    assert store.run_processes(rid) == []
    rec = runs.get(rid)
    assert rec.status == "stopped" and "stopped by the user" in rec.reason
    assert no_zombie_children()


def test_stop_a_queued_run_removes_it_from_the_queue(home):
    first = runs.submit_command(sleeper(30))
    second = runs.submit_command(sleeper(30))
    assert runs.get(second).status == "queued"
    assert runs.stop(second)
    assert runs.get(second).status == "stopped"
    runs.stop(first, grace_s=2)
    assert runs.get(second).started is None  # never started


def test_queue_of_three_runs_in_order_and_survives_studio_restart(home):
    log = home / "order.log"
    studio = textwrap.dedent(f"""
        import sys, time
        from engine.runs import registry as runs
        ids = [runs.submit_command({sleeper(2.0, log)!r}, name=f"q{{i}}") for i in range(3)]
        print(" ".join(ids), flush=True)
        time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([PY, "-c", studio], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    ids = proc.stdout.readline().split()
    assert len(ids) == 3
    wait_for(lambda: runs.get(ids[0]).status == "running")
    proc.kill()  # the studio dies with kill -9 while the first run trains
    proc.wait()
    statuses = [runs.get(i).status for i in ids]
    assert statuses.count("running") <= 1 and statuses[2] == "queued", statuses
    # a restarted studio schedules too; it must not start a second run while the slot is taken
    restarted = subprocess.run(
        [PY, "-c", "from engine.runs import registry as runs; print(runs.schedule())"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert restarted.returncode == 0 and restarted.stdout.strip() in ("[]", repr([ids[1]]), repr([ids[2]]))
    wait_for(lambda: all(runs.get(i).status == "completed" for i in ids), timeout=60)
    lines = [ln.split() for ln in log.read_text().splitlines()]
    assert [(rid, what) for rid, what, _ in lines] == [(i, w) for i in ids for w in ("start", "end")]
    recs = [runs.get(i) for i in ids]
    assert recs[0].ended <= recs[1].started and recs[1].ended <= recs[2].started


def test_queued_runs_of_a_dead_studio_start_on_the_next_schedule(home):
    ids = [runs.submit_command(sleeper(0.2), start=False) for _ in range(2)]
    assert [runs.get(i).status for i in ids] == ["queued", "queued"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [PY, "-c", "from engine.runs import registry as runs; runs.schedule()"],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    wait_for(lambda: all(runs.get(i).status == "completed" for i in ids), timeout=60)


def test_an_ending_or_deleted_runs_wrapper_holds_no_slot(home, monkeypatch):
    """A process that carries a run's marker holds its slot while the registry does not list it (a registry lost,
    even with the folders: tests/reliability/test_registry_lost.py)... but not once the run ended (exit.json: its
    wrapper recording the end) or was deleted with its files kept (forgotten), nor the wrapper of a run deleted with
    its folder. ci16: a run finished, was deleted while its wrapper was still ending, and the next run stayed queued
    for good (the wrapper's own schedule of the queue had come before it was submitted)."""
    from engine.core import workspace

    rid = "20261206-000000-abcd"
    rdir = workspace.runs_dir() / rid
    rdir.mkdir(parents=True)
    env = {**os.environ, "STUDIO_RUN_ID": rid, "STUDIO_HOME": str(home)}
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], env=env)
    try:
        wait_for(lambda: rid in scheduler._live_runs())  # a live process of a run the registry does not list
        queued = runs.submit_command(sleeper(0.2), name="next", start=False)
        assert runs.schedule() == [] and runs.get(queued).status == "queued"  # it holds the one CPU slot
        (rdir / "exit.json").write_text(json.dumps({"returncode": 0}))
        assert rid not in scheduler._live_runs()
        (rdir / "exit.json").unlink()
        records.note(rdir, forgotten=True)  # deleted, its files kept
        assert rid not in scheduler._live_runs()
        (rdir / records.RUN_NOTES).unlink()
        rdir.rmdir()  # its folder gone: a process that is not the wrapper still holds the slot
        assert rid in scheduler._live_runs()
        monkeypatch.setattr(scheduler, "is_wrapper", lambda p: p.pid == proc.pid)  # as the ending wrapper
        assert rid not in scheduler._live_runs()
        assert runs.schedule() == [queued]
        wait_for(lambda: runs.get(queued).status == "completed")
    finally:
        proc.kill()
        proc.wait()


def test_a_process_is_known_by_the_module_it_runs():
    """``processes.entry_module``: ``python [options] -m <module>`` names the module (a trainer rank, a run's wrapper);
    ``-c`` and scripts name none."""
    from engine.runs import processes

    code = "import time; time.sleep(60)"
    procs = {
        "timeit": subprocess.Popen([PY, "-X", "utf8", "-u", "-m", "timeit", "-n", "1", code]),
        None: subprocess.Popen([PY, "-c", code]),
    }
    try:
        for want, proc in procs.items():
            wait_for(lambda p=proc: len(psutil.Process(p.pid).cmdline()) > 2)  # exec'ed: its own command line
            found = psutil.Process(proc.pid)
            assert processes.entry_module(found) == want
            assert not processes.is_wrapper(found) and not processes.is_rank(found)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_run_that_cannot_start_fails_and_the_queue_moves_on(home):
    bad = runs.submit_command(["/nonexistent/program"], name="bad")
    good = runs.submit_command(sleeper(0.2), name="good")
    wait_for(lambda: runs.get(good).status == "completed", timeout=60)
    rec = runs.get(bad)
    assert rec.status == "failed" and rec.exit_code == 127


def test_a_served_model_does_not_keep_cpu_training_queued(home):  # noqa: F811
    """On a machine without GPUs a server holds no CPU slot (issue 45 item 12: a run queued behind a served model
    waited for as long as the server ran, its message naming nothing); a run queued behind a training run names
    that run, whose Stop frees the slot."""

    served = runs.submit_command(sleeper(60), name="serve demo", tags=[scheduler.SERVE_TAG])
    assert wait_for(lambda: runs.get(served).status == "running")
    first = runs.submit_command(sleeper(60), name="first")
    assert wait_for(lambda: runs.get(first).status == "running")  # the server held no slot
    second = runs.submit_command(sleeper(1), name="second")
    assert runs.get(second).status == "queued"
    assert [r.id for r in scheduler.slot_holders(runs.get(second))] == [first]
    runs.stop(first, grace_s=2)
    assert wait_for(lambda: runs.get(second).status in ("running", "completed"))
    runs.stop(served, grace_s=2)


def test_a_command_stopped_after_its_work_was_done_reads_completed(home):  # noqa: F811
    """An evaluation whose results were written (its eval_finished event) and then stopped, by a Cancel clicked as it
    ended or its teardown killed, is listed completed, not stopped (issue 47 item 9); one stopped before its end event
    reads stopped."""
    code = (
        "import os, sys, time; sys.path.insert(0, {root!r}); from engine.core.events import append_event; "
        "from engine.core import workspace; d = workspace.runs_dir() / os.environ['STUDIO_RUN_ID']; {write}"
        "print('ready', flush=True); time.sleep(60)"
    )
    done = "append_event(d / 'events.jsonl', 'eval_finished', None, results={{}}); "
    ids = {}
    for name, write in (("done", done.replace("{{}}", "{}")), ("midway", "")):
        argv = [PY, "-c", code.format(root=str(ROOT), write=write)]
        ids[name] = runs.submit_command(argv, name=name, tags=["eval"])
        assert wait_for(lambda rid=ids[name]: "ready" in runs.log_tail(rid))
        runs.stop(ids[name], grace_s=2)
    assert runs.get(ids["done"]).status == "completed"
    assert runs.get(ids["midway"]).status == "stopped"
