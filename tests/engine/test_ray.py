"""Ray as a launch target (``launch.target: ray``, engine.trainer.ray_driver) on a real Ray cluster: a head and a
second node started here with ``ray start``, each with one CPU, so Ray Train's two workers (one CPU each) can only
run one on each node (Ray numbers nodes by address, so both read node_rank 0 here).
The run goes through the registry like a local one (queue, runner, events.jsonl, stop) and trains over gloo.

Its losses equal the two-process DDP run's (accelerate launch) on the same spec and seed at every logged step, to
1e-5: the same two ranks, the same data shards, the same all-reduce; a rank on other data, gradients not averaged
or a worker that trained alone all move the loss by far more within a step or two.

Ray's nodes listen on the machine's own address, not 127.0.0.1: ``ray start --node-ip-address`` maps a loopback
address to it (ray._private.services.resolve_ip_for_localhost). The cluster has its own token (RAY_AUTH_MODE=token,
RAY_AUTH_TOKEN_PATH in a temporary folder) and each ``ray start`` runs in its own process group, which teardown ends
(never ``ray stop``, which stops every Ray of the machine).
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml

from engine.core import events
from engine.machine.hardware import cpu_only, target_machine
from engine.runs import records, scheduler
from engine.runs import registry as runs
from engine.runs.launch import build_command, launch_record
from engine.spec.schema import SpecError, parse_spec
from tests import helpers
from tests.helpers import demo_spec, log_tail, losses, run_trainer

STEPS = 4
wait_for = functools.partial(helpers.wait_for, every=0.5)


def spec_for(demo_paths, launch: dict, steps: int = STEPS):
    return demo_spec(
        demo_paths,
        launch=launch,
        train={
            "max_steps": steps,
            "per_device_batch_size": 2,
            "gradient_accumulation": 1,
            "save_steps": 1000,
            "logging_steps": 1,
            "learning_rate": 1e-3,
            "warmup_steps": 0,
        },
        data={"max_samples": 64},
        output={"report_to": ["none"]},
    )


RAY = {"target": "ray", "backend": "ddp", "device": "cpu", "ray": {"num_workers": 2}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _end_group(pgid: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait_s
        while helpers.group_alive(pgid) and time.time() < deadline:
            time.sleep(0.2)


def _end_workers(root: Path) -> None:
    """Ray's worker processes, each in a session of its own, end once their node has; those of this cluster (their
    command line names its temporary folder) are ended if they have not within 30 s."""

    def ours() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter():
            try:
                if any(str(root) in arg for arg in proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    deadline = time.time() + 30
    while ours() and time.time() < deadline:
        time.sleep(0.5)
    for proc in ours():
        proc.kill()


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray head and one more node (one CPU each) on this machine; the environment a client needs to reach it."""
    root = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths are limited to 107 bytes
    token = root / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    port = _free_port()
    client = {"RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(client, RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS")
    ray = str(Path(sys.executable).with_name("ray"))
    groups: list[int] = []
    # each node its own temporary folder: two nodes in one would both pass every worker's lines to the driver
    nodes = (
        ["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={root / 'h'}"],
        [f"--address=127.0.0.1:{port}", f"--temp-dir={root / 'w'}"],
    )
    try:
        for i, where in enumerate(nodes):
            log = root / f"start{i}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [ray, "start", *where, "--num-cpus=1", "--disable-usage-stats"],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            groups.append(proc.pid)
            assert proc.wait(timeout=240) == 0, log.read_text()[-3000:]
        yield client
    finally:
        for pgid in reversed(groups):
            _end_group(pgid)
        _end_workers(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ddp_losses(demo_paths, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ddp")
    rc, evs = run_trainer(spec_for(demo_paths, {"backend": "ddp", "num_processes": 2}), run_dir, timeout=600)
    assert rc == 0, log_tail(run_dir)
    return losses(evs)


@pytest.fixture
def home(demo_paths, ray_cluster, run_registry, monkeypatch) -> Path:
    for key, value in ray_cluster.items():
        monkeypatch.setenv(key, value)
    return run_registry


def _ended(rid: str) -> records.RunRecord:
    wait_for(lambda: runs.get(rid).status not in ("queued", "running"), timeout=600)
    return runs.get(rid)


@pytest.mark.parametrize(
    ("launch", "field", "words"),
    [
        ({"backend": "fsdp"}, "launch.backend", "set launch.backend to ddp"),
        ({"backend": "single", "ray": {"num_workers": 2}}, "launch.backend", "not single"),
        ({"num_processes": 2}, "launch.num_processes", "launch.ray.num_workers"),
        ({"num_machines": 2, "main_process_ip": "10.0.0.1"}, "launch.num_machines", "Ray places the workers"),
        ({"device": "cpu", "ray": {"resources_per_worker": {"GPU": 1}}}, "launch.ray.resources_per_worker", "cpu"),
        ({"ray": {"resources_per_worker": {"CPU": -1}}}, "launch.ray.resources_per_worker", "0 or more"),
        # an amount that is no number is said of the field, not of a resource's name (found by the spec fuzz test)
        ({"ray": {"resources_per_worker": {"": None}}}, "launch.ray.resources_per_worker", "0 or more"),
        ({"ray": {"resources_per_worker": {"GPU": "one"}}}, "launch.ray.resources_per_worker", "0 or more"),
        ({"ray": {"placement_strategy": "RANDOM"}}, "launch.ray.placement_strategy", "PACK"),
        ({"ray": {"num_workers": 0}}, "launch.ray.num_workers", "greater than or equal to 1"),
        ({"ray": {"workers": 2}}, "launch.ray.workers", "unknown field"),
        ({"ray": {"run_name": "a/b"}}, "launch.ray.run_name", "pattern"),
    ],
)
def test_a_ray_launch_the_spec_cannot_run_is_refused_in_one_line_naming_the_field(launch, field, words):
    data = {
        "model": {"name_or_path": "m"},
        "data": {"datasets": ["d"]},
        "launch": {"target": "ray", "backend": "ddp", **launch},
    }
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert len(info.value.problems) == 1, info.value.problems
    path, msg = info.value.problems[0]
    assert path == field and words in str(msg) and "\n" not in str(msg), (path, msg)


def test_a_ray_launch_without_ray_installed_is_refused_naming_the_package(monkeypatch):
    from engine.spec import launch_group as spec_launch

    monkeypatch.setattr(spec_launch, "ray_installed", lambda: False)
    data = {"model": {"name_or_path": "m"}, "data": {"datasets": ["d"]}, "launch": RAY}
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert [p for p, _ in info.value.problems] == ["launch.target"]
    assert 'pip install "ray[train]"' in str(info.value.problems[0][1])


def test_a_ray_launch_is_the_driver_with_rays_settings_and_takes_a_cpu_slot(demo_paths, tmp_path, monkeypatch):
    """The run's command is the Ray driver; Ray's settings (its address, its token: masked in launch.json) reach it;
    on GPUs Ray gives each worker its devices, so the driver pins none; the queue gives it a CPU slot, not GPUs."""
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "secret-token")
    gpu = {"target": "ray", "backend": "ddp", "device": "cuda", "ray": {"num_workers": 4}}
    spec = spec_for(demo_paths, gpu)
    plan = build_command(spec, tmp_path, cpu_only())  # a laptop in front of a GPU cluster
    assert plan.argv[1:4] == ["-m", "engine.trainer.ray_driver", str(tmp_path / "spec.yaml")]
    assert plan.device == "cuda" and plan.env["STUDIO_DEVICE"] == "cuda" and spec.world_size == 4
    assert "CUDA_VISIBLE_DEVICES" not in plan.env and plan.env["RAY_ADDRESS"] == "10.0.0.1:6379"
    assert launch_record(plan)["env"]["RAY_AUTH_TOKEN"] == "***"
    plan = build_command(spec_for(demo_paths, RAY), tmp_path, target_machine(2, 80.0))
    assert plan.device == "cpu" and plan.env["CUDA_VISIBLE_DEVICES"] == ""
    rec = type("Rec", (), {"id": "r", "kind": "train", "load_spec": lambda self: spec})()
    want = scheduler._want(rec, has_gpu=True)
    assert want.cpu and not want.count


@pytest.mark.slow
def test_a_ray_run_on_two_nodes_trains_the_ddp_runs_losses(home, ddp_losses, demo_paths):
    rid = runs.submit(spec_for(demo_paths, RAY), name="ray")
    rec = _ended(rid)
    rdir = Path(rec.run_dir)
    assert rec.status == "completed", f"{rec.reason}\n{log_tail(rdir, 80)}"
    assert "engine.trainer.ray_driver" in yaml.safe_load((rdir / "launch.json").read_text())["argv"]
    evs = events.read_all(rec.events_path)
    started = next(e for e in evs if e["type"] == "run_started")["payload"]
    assert started["world_size"] == 2 and started["device"] == "cpu"
    got = losses(evs)
    assert sorted(got) == sorted(ddp_losses) == list(range(1, STEPS + 1))
    for step, want in ddp_losses.items():
        assert abs(got[step] - want) <= 1e-5, f"step {step}: Ray {got[step]} vs DDP {want}"
    memory = next(e for e in evs if e["type"] == "log")["payload"]["memory"]
    assert [m["rank"] for m in memory] == [0, 1]
    assert evs[-1]["type"] == "finished"
    assert (Path(evs[-1]["payload"]["adapter_dir"]) / "adapter_model.safetensors").is_file()
    text = (rdir / "train.log").read_text(errors="replace")
    assert text.count("(RayTrainWorker pid=") >= 2 and "\x1b[" not in text, text[-3000:]  # the workers' lines, plain
    assert (rdir / "ray" / rdir.name).is_dir()  # Ray Train's storage: the run folder's ray/<run>


@pytest.mark.slow
def test_a_stopped_ray_run_saves_a_checkpoint_and_reads_stopped(home, demo_paths):
    rid = runs.submit(spec_for(demo_paths, RAY, steps=500), name="ray-stop")
    wait_for(lambda: any(e["type"] == "log" for e in events.read_all(runs.get(rid).events_path)), timeout=400)
    assert runs.stop(rid, grace_s=120) is True
    rec = runs.get(rid)
    assert rec.status == "stopped", f"{rec.reason}\n{log_tail(Path(rec.run_dir), 60)}"
    stopped = events.last_event(rec.events_path, ("stopped",))
    assert stopped is not None and stopped["step"] >= 1, log_tail(Path(rec.run_dir), 60)
    assert Path(stopped["payload"]["checkpoint"]).is_dir(), stopped
    ended = yaml.safe_load((Path(rec.run_dir) / "exit.json").read_text())
    assert ended["returncode"] == 0, ended
