"""Training runs under the registry with the real trainer on the demo spec (few steps, CPU, one thread)."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import yaml

from engine.commands.runs_cli import cli
from engine.core import events
from engine.runs import records, store
from engine.runs import registry as runs
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(demo_paths, run_registry) -> Path:
    """A private registry (demo_paths first: the demo model stays in the session workspace where it was built)."""
    return run_registry


def demo_spec(demo_paths, steps: int, **launch) -> dict:
    data = yaml.safe_load(Path(demo_paths["example_spec"]).read_text())
    data["train"].update(max_steps=steps, logging_steps=1, save_steps=1000)
    data["data"]["max_samples"] = 64
    data["launch"].update(launch)
    data["output"]["report_to"] = ["none"]
    return data


wait_for = functools.partial(helpers.wait_for, timeout=120.0, every=0.2)


def types(rec: records.RunRecord) -> list[str]:
    return [e["type"] for e in events.read_all(rec.events_path)]


def test_studio_killed_mid_run_then_a_new_studio_sees_it_completed(home, demo_paths):
    spec_path = home / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(demo_spec(demo_paths, 6)))
    studio = textwrap.dedent(f"""
        import time
        from engine.runs import registry as runs
        print(runs.submit({str(spec_path)!r}, name="survivor"), flush=True)
        time.sleep(600)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", studio], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    rid = proc.stdout.readline().strip()
    wait_for(lambda: "run_started" in types(runs.get(rid)))
    proc.kill()  # kill -9 the studio mid-run
    proc.wait()
    assert runs.get(rid).status == "running"
    rec = wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=180)
    assert rec.status == "completed", rec.reason
    evs = events.read_all(rec.events_path)
    steps = [e["step"] for e in evs if e["type"] == "log" and "loss" in e["payload"]]
    assert steps == list(range(1, 7))  # the full curve, written while no studio was watching
    assert evs[-1]["type"] == "finished" and (Path(rec.output_dir) / "adapter").is_dir()
    assert cli(["replay", rid, "--dry-run"]) == 0  # same machine, same files: nothing to warn about


def test_trainer_killed_with_sigkill_is_failed_with_a_reason(home, demo_paths):
    rid = runs.submit(demo_spec(demo_paths, 500), name="victim")
    wait_for(lambda: "log" in types(runs.get(rid)))
    trainers = [
        p
        for p in store.run_processes(rid)
        if "engine.trainer.train" in " ".join(p.cmdline()) and "accelerate" not in " ".join(p.cmdline())
    ]
    assert len(trainers) == 1
    trainers[0].send_signal(signal.SIGKILL)  # what the OOM killer does
    t0 = time.time()
    rec = wait_for(lambda: runs.get(rid).status != "running" and runs.get(rid), timeout=30, every=0.05)
    assert time.time() - t0 < 10  # the launcher has to notice first; the registry follows at once
    assert rec.status == "failed" and "SIGKILL" in rec.reason and "train.log" in rec.reason
    last = events.last_event(rec.events_path)
    assert last["type"] == "failed" and last["payload"]["cause"] == "killed"
    # the runner keeps the catalog key beside its English text, so the page can say it in Chinese
    assert last["payload"]["error"] == "killed by signal SIGKILL"
    assert last["payload"]["error_msg"]["key"] == "runs.killed_by_signal"
    assert store.run_processes(rid) == []


@pytest.mark.slow
def test_stop_on_a_two_process_ddp_run_leaves_no_process(home, demo_paths):
    """accelerate's launcher (here torch's elastic agent, for DDP) answers SIGTERM by killing its ranks a few seconds
    later: a checkpoint that takes longer to save was lost and the run read "stopped before it reported". A stop
    signals the ranks only; the launcher ends once they have, with their exit code, and no process is left."""
    rid = runs.submit(
        demo_spec(demo_paths, 500, backend="ddp", num_processes=2, device="cpu", main_process_port=29611), name="ddp"
    )
    wait_for(lambda: "log" in types(runs.get(rid)), timeout=180)
    procs = store.run_processes(rid)
    ranks, launchers = _ranks_and_launchers(rid)
    assert len(ranks) == 2 and [p for p in launchers if "accelerate.commands.launch" in " ".join(p.cmdline())]
    pids = [p.pid for p in procs]
    assert runs.stop(rid, grace_s=120) is True
    assert store.run_processes(rid) == []
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    rec = runs.get(rid)
    assert rec.status == "stopped", rec.reason
    ended = yaml.safe_load((Path(rec.run_dir) / "exit.json").read_text())
    assert ended["returncode"] == 0 and ended["signal"] is None, ended  # the launcher was not signalled
    stopped = events.last_event(rec.events_path, ("stopped",))
    assert stopped["step"] >= 1 and Path(stopped["payload"]["checkpoint"]).is_dir(), stopped  # the trainer's own


def test_a_cpu_run_logs_no_warning_a_user_cannot_act_on(home, demo_paths):
    """Issue 27, item 15: a plain CPU run's train.log carried warnings that read as if something were wrong with it:
    transformers' renamed gradient_checkpointing arguments, peft's use of a deprecated property, and DeepSpeed saying
    it found no GPU ("If you have GPU ... we were unable to detect it"). The run, with checkpointing on, logs none."""
    data = demo_spec(demo_paths, 2, device="cpu")
    data["train"]["gradient_checkpointing"] = "on"
    rid = runs.submit(data, name="quiet")
    rec = wait_for(lambda: (r := runs.get(rid)).status not in ("queued", "running") and r, timeout=300)
    log = (Path(rec.run_dir) / "train.log").read_text()
    assert rec.status == "completed", log[-3000:]
    for noise in ("is deprecated and will be removed in v6", "we were unable to detect it", "pip install kernels"):
        assert noise not in log, noise
    started = next(e for e in events.read_all(rec.events_path) if e["type"] == "run_started")["payload"]
    assert started["gradient_checkpointing"] is True  # still on, under its new name


def _ranks_and_launchers(rid: str) -> tuple[list[psutil.Process], list[psutil.Process]]:
    from engine.runs import processes

    procs = store.run_processes(rid)
    return [p for p in procs if processes.is_rank(p)], [p for p in procs if not processes.is_rank(p)]


def test_a_single_process_run_is_the_trainer_itself_and_stops_with_its_checkpoint(home, demo_paths):
    """One process on one machine starts without accelerate's launcher (engine.runs.launch): the run's one process
    is the trainer, started by the runner, and a stop reaches it directly: it saves, reports, and exits 0."""
    rid = runs.submit(demo_spec(demo_paths, 500), name="stop-rank")
    wait_for(lambda: "log" in types(runs.get(rid)))
    ranks, others = _ranks_and_launchers(rid)
    assert len(ranks) == 1 and ranks[0].pid == runs.get(rid).pid, [p.cmdline() for p in ranks + others]
    assert not [p for p in others if "accelerate" in " ".join(p.cmdline())], [p.cmdline() for p in others]
    assert runs.stop(rid, grace_s=120) is True
    rec = runs.get(rid)
    assert rec.status == "stopped", rec.reason
    ended = yaml.safe_load((Path(rec.run_dir) / "exit.json").read_text())
    assert ended["returncode"] == 0 and ended["signal"] is None, ended
    stopped = events.last_event(rec.events_path, ("stopped",))
    assert stopped["step"] >= 1 and Path(stopped["payload"]["checkpoint"]).is_dir(), stopped  # the trainer's own


def test_a_trainer_gone_before_it_reported_its_stop_names_its_last_checkpoint(home, demo_paths):
    """A stop asked for, and the trainer gone before it could write its stopped event (killed while saving): the
    runner's stopped event names the last step it reported and its newest whole checkpoint on disk, which the page's
    Stop message then names (it said "stopped before its first step; no checkpoint was saved")."""
    from studio.tabs.train_actions import stop_report

    data = demo_spec(demo_paths, 500)
    data["train"]["save_steps"] = 2
    rid = runs.submit(data, name="gone")
    wait_for(lambda: "checkpoint" in types(runs.get(rid)))
    ranks, _ = _ranks_and_launchers(runs.get(rid).id)
    runs.store.update(rid, stop_requested=time.time())  # Stop was pressed ...
    ranks[0].send_signal(signal.SIGKILL)  # ... and the trainer died before it answered
    rec = wait_for(lambda: (r := runs.get(rid)).status != "running" and r, timeout=60)
    assert rec.status == "stopped", rec.reason
    evs = events.read_all(rec.events_path)
    saved = [e["payload"]["path"] for e in evs if e["type"] == "checkpoint"]
    logged = [e["step"] for e in evs if e["type"] == "log"]
    stopped = evs[-1]
    assert stopped["type"] == "stopped" and stopped["step"] == logged[-1], evs[-3:]
    assert stopped["payload"]["checkpoint"] == saved[-1] and Path(saved[-1]).is_dir(), (saved, stopped)
    shown = stop_report(rec)
    assert f"stopped at step {logged[-1]}" in shown and saved[-1] in shown, shown
    assert "before its first step" not in shown
