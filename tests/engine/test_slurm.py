"""Slurm as a launch target: the spec's fields and rules, the batch script, the refusals, and real jobs on a one-host
cluster that the test session starts (tests/slurm_cluster.py): a CPU run of the demo submitted through the registry
completes with its loss curve and its node's system metrics, and is re-attached by a studio started after the one
that submitted it; `studio runs list`, the Runs tab and the dashboard show its job and state; a cancelled job reads
"cancelled" with a checkpoint; a stop past its grace period is finished by the next look at the run; a held job shows
its pending reason, and fails with its cause once released; a job over its time limit reads "timeout". Without a
cluster: every node's task samples its own metrics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.events import read_all
from engine.machine.hardware import cpu_only
from engine.runs import slurm
from engine.runs.launch import build_command
from engine.runs.node_commands import slurm_script
from engine.spec.schema import SpecError, validate_spec
from tests.helpers import demo_spec, wait_for

ROOT = Path(__file__).resolve().parents[2]


def slurm_spec(demo_paths, *, steps=4, slurm_opts=None, save_steps=1000, **groups):
    return demo_spec(
        demo_paths,
        launch={"target": "slurm", "device": "cpu", "slurm": slurm_opts or {}},
        train={"max_steps": steps, "logging_steps": 1, "save_steps": save_steps, "per_device_batch_size": 2},
        data={"max_samples": 32},
        output={"report_to": ["none"]},
        **groups,
    )


# ----------------------------------------------------------------------------------------------- no cluster needed
def problems_of(data) -> dict:
    _valid, errors, _warnings = validate_spec(data)
    return {path: str(msg) for path, msg in errors}


def test_slurm_fields_are_validated_with_their_names(demo_paths):
    data = slurm_spec(demo_paths).model_dump(mode="json")
    data["launch"]["slurm"] = {
        "time_limit": "ten minutes",
        "memory": "lots",
        "partition": "gpu; rm -rf /",
        "gpus_per_node": -1,
        "extra_sbatch": ["--exclusive", "echo hi"],
    }
    errors = problems_of(data)
    for field in ("time_limit", "memory", "partition", "gpus_per_node"):
        assert f"launch.slurm.{field}" in errors, errors
    data["launch"]["slurm"] = {"extra_sbatch": ["--exclusive", "echo hi"], "gpus_per_node": 2}
    data["launch"]["machine_rank"] = 1
    data["launch"]["num_machines"] = 2
    data["launch"]["backend"] = "ddp"
    errors = problems_of(data)
    assert "line 2" in errors["launch.slurm.extra_sbatch"]
    assert "launch.machine_rank" in errors and "launch.slurm.gpus_per_node" in errors
    assert "launch.main_process_ip" not in errors  # on Slurm the allocation's first node is the main address


def test_batch_script_has_the_options_one_task_per_node_and_a_graceful_launcher(demo_paths, tmp_path):
    spec = slurm_spec(
        demo_paths,
        slurm_opts={
            "partition": "big",
            "account": "lab",
            "qos": "high",
            "cpus_per_node": 8,
            "memory": "64G",
            "time_limit": "1-02:00:00",
            "constraint": "a100",
            "extra_sbatch": ["#SBATCH --mail-type=END", "--exclusive"],
        },
    )
    spec.launch.backend, spec.launch.num_machines = "ddp", 2
    plan = build_command(spec, tmp_path, cpu_only())
    script = plan.slurm_script
    for line in (
        "--nodes=2",
        "--ntasks-per-node=1",
        "--partition=big",
        "--account=lab",
        "--qos=high",
        "--cpus-per-task=8",
        "--mem=64G",
        "--time=1-02:00:00",
        "--constraint=a100",
        "--mail-type=END",
        "--exclusive",
    ):
        assert f"#SBATCH {line}\n" in script, line
    assert "--gpus-per-node" not in script  # CPU: no GPUs asked
    assert '--machine_rank "$SLURM_NODEID"' in script and '--main_process_ip "$MAIN_ADDR"' in script
    assert 'trap "" TERM; ' in script and "srun --kill-on-bad-exit=1" in script


def _sampler_processes(run_dir: Path) -> list:
    import psutil

    out = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "engine.runs.metrics" in cmd and str(run_dir) in cmd:
            out.append(proc)
    return out


def test_every_nodes_task_samples_its_metrics_until_it_ends(demo_paths, tmp_path):
    """The srun line of the batch script, run as Slurm runs it on node 0 and node 1 (SLURM_NODEID), around a busy
    process standing in for the launcher: each node writes its own samples file with the task's processes (the
    sampler itself left out), only node 0 says in the events that GPU metrics are off, and the sampler ends with the
    task."""
    code = (
        'import os, sys, time; open(sys.argv[1] + os.environ["SLURM_NODEID"], "w").write(str(os.getpid())); '
        'd = time.time() + 2.5; exec("while time.time() < d: pass")'
    )
    busy = [sys.executable, "-c", code, str(tmp_path / "busy-pid-")]
    script = slurm_script(slurm_spec(demo_paths), busy, {}, run_dir=tmp_path)
    (srun,) = [line for line in script.splitlines() if line.startswith("srun ")]
    task = srun.removeprefix("srun --kill-on-bad-exit=1 ")
    env = {**os.environ, "STUDIO_METRICS_INTERVAL": "0.2", "PYTHONPATH": str(ROOT)}
    nodes = [
        subprocess.Popen(["bash", "-c", task], env={**env, "SLURM_NODEID": str(n)}, cwd=ROOT, start_new_session=True)
        for n in (0, 1)
    ]
    assert [p.wait(timeout=60) for p in nodes] == [0, 0]
    assert wait_for(lambda: not _sampler_processes(tmp_path), timeout=20), "the sampler outlived its task"
    for node, name in enumerate(("metrics.jsonl", "metrics-node1.jsonl")):
        busy_pid = int((tmp_path / f"busy-pid-{node}").read_text())
        samples = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        assert len(samples) >= 3, (name, samples)
        procs = [p for s in samples for p in s["processes"]]
        mine = [p for p in procs if p["pid"] == busy_pid]
        assert mine and max(p["rss_mib"] for p in mine) > 1 and max(p["cpu_pct"] for p in mine) > 0, procs
        # besides it, at most the task's shell (bash may exec the launcher instead): never the sampler itself
        assert {p["name"] for p in procs if p["pid"] != busy_pid} <= {"bash"}, procs
    warnings = [e for e in read_all(tmp_path / "events.jsonl") if e["type"] == "warning"]
    assert len(warnings) == 1 and "GPU metrics" in warnings[0]["payload"]["message"], warnings
    # the dashboard draws both nodes' samples, each named by its node
    from studio import monitor

    view = monitor.new_view("r", tmp_path)
    monitor.read_new(view)
    mem, util, _ = monitor.gpu_frames(view)
    assert list(dict.fromkeys(mem["curve"])) == ["node 0 · CPU RAM (run)", "node 1 · CPU RAM (run)"], mem
    assert list(dict.fromkeys(util["curve"])) == ["node 0 · CPU", "node 1 · CPU"], util


# Slurm's reason code as the Runs tab's cluster column and the dashboard's status line show it (both through
# runs_tab.cluster_text): the code as Slurm wrote it in both languages, explained in Chinese on the Chinese page.
_REASONS_ZH = {
    "Resources": "等待资源 (Resources)",
    "Priority": "等待优先级更高的作业先运行 (Priority)",
    "ReqNodeNotAvail, UnavailableNodes:n1": "指定的节点暂不可用 (ReqNodeNotAvail, UnavailableNodes:n1)",
    "BeginTime": "未到指定的开始时间 (BeginTime)",
    "Dependency": "等待所依赖的作业结束 (Dependency)",
    "QOSMaxJobsPerUserLimit": "已达 QOS 限额 (QOSMaxJobsPerUserLimit)",
    "AssocGrpGRES": "已达账户（关联）限额 (AssocGrpGRES)",
    "PartitionTimeLimit": "作业的时间限制超过分区上限 (PartitionTimeLimit)",
    "JobHeldUser": "被用户挂起 (JobHeldUser)",
}


@pytest.mark.parametrize("code", [*_REASONS_ZH, "SomethingNew", "None", ""])
def test_pending_reason_keeps_slurms_code_and_is_explained_on_the_chinese_page(tmp_path, code):
    from types import SimpleNamespace

    from studio.tabs import runs as runs_tab

    (tmp_path / "slurm.json").write_text(json.dumps({"job_id": "12", "state": "pending", "reason": code}))
    rec = SimpleNamespace(kind=slurm.KIND, run_dir=str(tmp_path), tags=["slurm-job:12"])
    shown = f" ({code})" if code not in ("", "None") else ""
    assert str(slurm.describe(rec)) == f"Slurm job 12: pending{shown}"  # the CLI and the English page
    assert runs_tab.cluster_text(rec) == f"Slurm job 12: pending{shown}"
    zh = runs_tab.cluster_text(rec, "zh")
    if code in _REASONS_ZH:
        assert zh == f"Slurm 作业 12：排队等待中，{_REASONS_ZH[code]}"
    else:  # a code the page does not know is shown as Slurm wrote it
        assert zh == f"Slurm 作业 12：排队等待中{shown}"


def test_refused_without_slurm_commands_or_a_shared_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_SLURM_BIN", str(tmp_path / "nowhere"))
    (msg,) = slurm.problems()
    assert msg[0] == "launch.target" and "sbatch" in str(msg[1]) and "STUDIO_SLURM_BIN" in str(msg[1])
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("sbatch", "squeue", "scancel", "scontrol", "sinfo"):
        (fake / name).write_text("#!/bin/sh\necho other-node\n")
        (fake / name).chmod(0o755)
    monkeypatch.setenv("STUDIO_SLURM_BIN", str(fake))
    monkeypatch.delenv("STUDIO_SLURM_SHARED", raising=False)
    assert "STUDIO_SLURM_SHARED" in str(slurm.problems()[0][1])
    monkeypatch.setenv("STUDIO_SLURM_SHARED", str(tmp_path / "missing"))
    assert "does not exist" in str(slurm.problems()[0][1])
    monkeypatch.setenv("STUDIO_SLURM_SHARED", str(tmp_path))
    if slurm.filesystem_type(tmp_path) in slurm.LOCAL_FS:  # the fake sinfo names a node that is not this machine
        assert "local filesystem" in str(slurm.problems()[0][1])


def test_submit_is_refused_with_the_field_named(run_registry, demo_paths, monkeypatch, tmp_path):
    from engine.runs import registry

    monkeypatch.setenv("STUDIO_SLURM_BIN", str(tmp_path / "nowhere"))
    with pytest.raises(SpecError) as exc:
        registry.submit(slurm_spec(demo_paths))
    assert any(path == "launch.target" for path, _ in exc.value.problems)
    assert registry.list_runs() == []


# ----------------------------------------------------------------------------------------------- a real cluster
@pytest.fixture
def on_cluster(slurm_cluster, run_registry, monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("STUDIO_SLURM_SHARED", str(shared))
    monkeypatch.setenv("STUDIO_SLURM_PARTITION", "debug")
    monkeypatch.delenv("STUDIO_SLURM_BIN", raising=False)
    return slurm_cluster


def wait_status(run_id, statuses, timeout=240):
    from engine.runs import registry

    return wait_for(lambda: (r := registry.get(run_id)).status in statuses and r, timeout=timeout, every=0.5)


def wait_logged(run_id, timeout=180):
    from engine.core import events
    from engine.runs import registry

    rec = registry.get(run_id, refresh_status=False)
    return wait_for(lambda: [e for e in events.read_all(rec.events_path) if e["type"] == "log"], timeout, 0.5)


@pytest.mark.slow
def test_a_submitted_run_completes_and_a_restarted_studio_reattaches(on_cluster, demo_paths, tmp_path):
    from engine.core import events
    from engine.runs import registry
    from engine.spec.schema import save_spec

    spec_path = tmp_path / "spec.yaml"
    save_spec(slurm_spec(demo_paths, steps=6), spec_path)
    # Studio A submits and exits while the job is pending or running; this test process is the studio started after.
    code = (
        "import sys; from engine.runs import registry; "
        f"rid = registry.submit({str(spec_path)!r}); print(rid); "
        "print(registry.get(rid).reason, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.split()[-1]
    assert "Slurm job" in out.stderr
    rec = registry.get(run_id)
    assert rec.kind == "slurm" and slurm.job_id(rec) and rec.run_dir.startswith(os.environ["STUDIO_SLURM_SHARED"])
    assert (Path(rec.run_dir) / "run.slurm").exists()
    rec = wait_status(run_id, ("completed", "failed", "stopped"))
    assert rec.status == "completed", rec.reason + "\n" + on_cluster.log("slurmd")
    assert slurm.read_state(rec)["state"] == "completed"
    losses = [e["payload"]["loss"] for e in events.read_all(rec.events_path) if "loss" in e.get("payload", {})]
    assert len(losses) == 6, losses  # the loss curve, read from the shared run folder
    assert (Path(rec.output_dir) / "adapter").is_dir()
    # The job sampled its node's system metrics (the dashboard's RAM / CPU charts): the launcher and the trainer.
    samples = [json.loads(line) for line in (Path(rec.run_dir) / "metrics.jsonl").read_text().splitlines()]
    procs = [p for sample in samples for p in sample["processes"]]
    assert len({p["pid"] for p in procs}) >= 2 and max(sample["rss_mib"] for sample in samples) > 50, samples[-3:]
    assert wait_for(lambda: not _sampler_processes(Path(rec.run_dir)), timeout=30), "the sampler outlived the job"
    jid = slurm.job_id(rec)
    listing = subprocess.run(
        [sys.executable, "-m", "engine.cli", "runs", "list"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run_id in listing.stdout and f"completed · Slurm job {jid}: completed" in listing.stdout, listing.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "engine.cli", "runs", "show", run_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"slurm        Slurm job {jid}: completed" in shown.stdout, shown.stdout + shown.stderr
    # The page's views of it: the Runs tab's cluster column and the dashboard's status, in English and Chinese.
    from studio.tabs import dashboard
    from studio.tabs import runs as runs_tab

    rows = runs_tab.table().to_dict("records")
    assert [r["cluster"] for r in rows if r["id"] == run_id] == [f"Slurm job {jid}: completed"], rows
    assert dict(zip(runs_tab.table("zh")["ID"], runs_tab.table("zh")["集群"]))[run_id] == f"Slurm 作业 {jid}：已完成"
    assert dashboard.run_status(run_id) == f"completed · Slurm job {jid}: completed"


@pytest.mark.slow
def test_cancel_saves_a_checkpoint_and_reads_cancelled(on_cluster, demo_paths):
    from engine.runs import registry

    run_id = registry.submit(slurm_spec(demo_paths, steps=100000, save_steps=100000))
    wait_logged(run_id)
    assert "running" in registry.get(run_id).reason
    assert registry.stop(run_id, grace_s=90)
    rec = wait_status(run_id, ("stopped", "failed", "completed"))
    assert rec.status == "stopped", rec.reason
    assert slurm.read_state(rec)["state"] == "cancelled" and "cancelled" in rec.reason
    ckpts = list((Path(rec.output_dir) / "checkpoints").glob("checkpoint-*"))
    assert ckpts, f"no checkpoint saved on cancel:\n{registry.log_tail(run_id)}"


@pytest.mark.slow
def test_a_held_job_shows_its_reason_then_fails_with_its_cause(on_cluster, demo_paths, tmp_path, capsys):
    import shutil

    from engine.runs import registry

    model = tmp_path / "model"
    shutil.copytree(demo_paths["model_dir"], model)
    spec = slurm_spec(demo_paths, slurm_opts={"extra_sbatch": ["--hold"]}, model={"name_or_path": str(model)})
    run_id = registry.submit(spec)
    rec = wait_for(lambda: (r := registry.get(run_id)).reason.endswith("(JobHeldUser)") and r, timeout=60)
    assert rec.status == "running" and slurm.read_state(rec)["state"] == "pending"
    assert "pending" in rec.reason
    jid = slurm.job_id(rec)
    from engine.commands import runs_cli
    from studio.tabs import runs as runs_tab

    assert runs_cli.cli(["runs", "list"]) == 0
    assert f"running · Slurm job {jid}: pending (JobHeldUser)" in capsys.readouterr().out
    assert runs_tab.cluster_text(rec) == f"Slurm job {jid}: pending (JobHeldUser)"
    assert runs_tab.cluster_text(rec, "zh") == f"Slurm 作业 {jid}：排队等待中，被用户挂起 (JobHeldUser)"
    from studio.tabs import train_actions

    assert train_actions.identical_active_run(rec.load_spec()).id == run_id  # a second Start of this form asks first
    (model / "config.json").write_text("{ not json", encoding="utf-8")  # the job will find a broken model
    on_cluster.run("scontrol", "release", slurm.job_id(rec))
    rec = wait_status(run_id, ("failed", "completed", "stopped"))
    assert rec.status == "failed" and slurm.read_state(rec)["state"] == "failed", rec.reason
    assert "Slurm job" in rec.reason and "config.json" in rec.reason, rec.reason


@pytest.mark.slow
def test_a_job_over_its_time_limit_reads_timeout(on_cluster, demo_paths):
    from engine.runs import registry

    run_id = registry.submit(slurm_spec(demo_paths, steps=100000, slurm_opts={"time_limit": "1"}))
    started = time.time()
    rec = wait_status(run_id, ("failed", "completed", "stopped"), timeout=300)
    assert rec.status == "failed" and slurm.read_state(rec)["state"] == "timeout", rec.reason
    assert "timeout" in rec.reason and time.time() - started >= 55


@pytest.mark.slow
def test_a_stop_past_its_grace_period_is_finished_by_the_follower(on_cluster, demo_paths):
    """The page's Stop sends only SIGTERM and returns; when the grace period is over and the job still holds on,
    whoever looks at the run next (a page, the watchdog, `studio runs list`) cancels it. A held job stands in for
    one that ignored the SIGTERM: its stop was asked longer ago than STUDIO_STOP_GRACE."""
    from engine.runs import registry, store

    run_id = registry.submit(slurm_spec(demo_paths, slurm_opts={"extra_sbatch": ["--hold"]}))
    wait_for(lambda: slurm.read_state(registry.get(run_id))["state"] == "pending", timeout=60)
    store.update(run_id, stop_requested=time.time() - 300)  # STUDIO_STOP_GRACE is 120 s
    rec = wait_status(run_id, ("stopped", "failed", "completed"), timeout=60)
    assert rec.status == "stopped" and slurm.read_state(rec)["state"] == "cancelled", rec.reason
