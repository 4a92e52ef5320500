"""Two machines for real: two network namespaces joined by a veth pair, each with its own address, run the exact
per-node commands that ``studio preview`` prints for a 2-machine x 1-process spec on CPU: DDP (gloo) and DeepSpeed
ZeRO-2 (DeepSpeed's CPU accelerator over the same gloo group).

The namespaces share this machine's filesystem, which stands for the shared folder (NFS, Lustre) that multi-node
runs need: the run folder, the model, the data and the Python environment at the same paths on every node. The
network between the ranks is only the veth pair: rank 1 reaches the main process at rank 0's address on it.

What proves it: both node commands exit 0; the run reports world size 2; every step's log event carries the memory
of ranks 0 and 1 (gathered by a collective at that step, so both ranks reached every step) and is written once, by
rank 0, which ran on machine 0; the losses and the saved adapter weights equal those of one process with the same
global batch (DDP and ZeRO-2 average the gradients exactly; see tests/engine/test_distributed.py for why 1e-3
relative is a safe bound). For ZeRO-2, the checkpoint holds DeepSpeed's optimizer states in two shards, one per rank:
DeepSpeed really trained (accelerate can silently fall back to plain DDP on CPU, which the losses alone would not
show).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from engine.machine.hardware import cpu_only
from engine.runs.launch import preview_text
from engine.spec.schema import save_spec
from tests.helpers import deepspeed_shards, demo_spec, log_tail, losses, run_trainer

pytestmark = pytest.mark.slow
STEPS = 4
ROOT = Path(__file__).resolve().parents[2]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def netns_unavailable() -> str | None:
    """Why this machine cannot create network namespaces (None: it can)."""
    if not shutil.which("ip"):
        return "the 'ip' command (iproute2) is missing"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"studio-probe-{uuid.uuid4().hex[:6]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"'ip netns add' is not allowed here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@pytest.fixture
def two_hosts():
    """Two namespaces A (10.213.7.1) and B (10.213.7.2) on one veth pair; removed afterwards, whatever happened."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(f"two-host test needs network namespaces: {reason}")
    tag = uuid.uuid4().hex[:6]
    names = [f"studio-{tag}-a", f"studio-{tag}-b"]
    addrs = ["10.213.7.1", "10.213.7.2"]
    made: list[str] = []
    try:
        for ns in names:
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        # The same interface name in both hosts, so one GLOO_SOCKET_IFNAME fits every node (as on a real cluster).
        _ip(
            "link", "add", f"sa{tag}", "netns", names[0], "type", "veth", "peer", "name", f"sb{tag}", "netns", names[1]
        )
        for ns, end, addr in zip(names, (f"sa{tag}", f"sb{tag}"), addrs):
            _ip("-n", ns, "link", "set", end, "name", "studio0")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "studio0")
            _ip("-n", ns, "link", "set", "studio0", "up")
        ping = subprocess.run(
            ["ip", "netns", "exec", names[1], "ping", "-c", "1", "-W", "5", addrs[0]], capture_output=True, text=True
        )
        if shutil.which("ping") and ping.returncode != 0:
            raise AssertionError(f"the two namespaces cannot reach each other: {ping.stdout}{ping.stderr}")
        yield list(zip(names, addrs))
    finally:
        for ns in made:  # deleting a namespace removes its end of the veth pair, and with it the pair
            _ip("netns", "del", ns, check=False)


def train_overrides(launch: dict, batch: int) -> dict:
    return dict(
        launch=launch,
        train={
            "max_steps": STEPS,
            "per_device_batch_size": batch,
            "gradient_accumulation": 1,
            "save_steps": 1000,
            "logging_steps": 1,
            "learning_rate": 1e-3,
            "warmup_steps": 0,
        },
        # Padded batches on both sides: a flattened row of 4 samples (padding-free) and 2 ranks x 2 samples round
        # differently, and Adam turns the rounding of near-zero gradients into weight differences above the
        # tolerance below (the same for DDP and ZeRO-2, which both average the gradients of a rank's padded batch);
        # what this test checks is the two-host path, not the batch layout.
        data={"max_samples": 32, "padding_free": "off"},
        output={"report_to": ["none"]},
    )


def printed_blocks(text: str) -> dict[str, str]:
    """``studio preview``'s text by its ``# heading`` blocks: commands, environment, each config file."""
    blocks = {}
    for block in text.split("\n\n"):
        head, _, body = block.strip("\n").partition("\n")
        blocks[head.strip()] = body
    return blocks


def printed_commands(text: str) -> tuple[list[str], dict[str, str]]:
    """The per-machine commands and the environment from ``studio preview``'s text, as a user would copy them."""
    blocks = printed_blocks(text)
    machines = sorted(k for k in blocks if re.fullmatch(r"# machine \d+", k))
    env = dict(line.split("=", 1) for line in blocks["# environment"].splitlines() if "=" in line)
    return [blocks[k].strip() for k in machines], env


def adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    path = folder / "adapter_model.safetensors"
    assert path.is_file(), f"no adapter saved in {folder}"
    return load_file(str(path))


# Per backend: the launch fields, and the environment ``studio preview`` must print for it on CPU (STACK-NOTES).
LAUNCHES = {
    # ACCELERATE_USE_CPU with --multi_gpu: real gloo DDP on CPU
    "ddp": ({"backend": "ddp"}, {"ACCELERATE_USE_CPU": "true"}),
    # DeepSpeed's CPU accelerator; no ACCELERATE_USE_CPU, which would turn the run into plain DDP
    "zero2": ({"backend": "deepspeed", "deepspeed": {"zero_stage": 2}}, {"DS_ACCELERATOR": "cpu"}),
}


@pytest.fixture(scope="module")
def single(demo_paths, tmp_path_factory):
    """The same global batch on one process: the losses and the adapter both two-node runs must reach."""
    run_dir = tmp_path_factory.mktemp("single")
    one = demo_spec(demo_paths, **train_overrides({"backend": "single", "device": "cpu"}, 4))
    rc, events = run_trainer(one, run_dir, timeout=300)
    assert rc == 0, log_tail(run_dir)
    return losses(events), adapter_tensors(run_dir / "adapter")


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_two_namespaces_run_the_printed_commands(name, two_hosts, single, demo_paths, tmp_path):
    (ns_a, addr_a), (ns_b, _addr_b) = two_hosts
    fields, want_env = LAUNCHES[name]
    run_dir = tmp_path / "two-nodes"
    run_dir.mkdir()
    launch = {
        **fields,
        "device": "cpu",
        "num_processes": 1,
        "num_machines": 2,
        "machine_rank": 0,
        "main_process_ip": addr_a,
        "main_process_port": 29517,
    }
    spec = demo_spec(demo_paths, **train_overrides(launch, 2))
    save_spec(spec, run_dir / "spec.yaml")  # the shared run folder: spec and configs seen by every node
    text = preview_text(spec, run_dir, cpu_only())
    commands, printed_env = printed_commands(text)
    assert len(commands) == 2, text
    assert f"--main_process_ip {addr_a}" in commands[1] and "--machine_rank 1" in commands[1], text
    for key, value in want_env.items():
        assert printed_env.get(key) == value, text
    if fields["backend"] == "deepspeed":
        assert "ACCELERATE_USE_CPU" not in printed_env, text
    # The configs the commands name, as `studio preview` printed them (a user saves them into the shared folder).
    for head, body in printed_blocks(text).items():
        if head.startswith(f"# {run_dir}/"):
            Path(head[2:]).write_text(body + "\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_", "LOCAL_"))}
    env.pop("ACCELERATE_USE_CPU", None)
    env.update(printed_env)
    env.update({"PYTHONPATH": str(ROOT), "GLOO_SOCKET_IFNAME": "studio0", "STUDIO_FORCE_CPU": "1"})
    procs = []
    try:
        for rank, (ns, cmd) in enumerate(zip((ns_a, ns_b), commands)):
            log = open(run_dir / f"node{rank}.log", "wb")
            procs.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", ns, "bash", "-c", cmd],
                    env=env,
                    cwd=str(ROOT),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        codes = [p.wait(timeout=480) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    logs = "\n".join(f"--- node {i}\n" + log_tail_of(run_dir / f"node{i}.log") for i in range(2))
    assert codes == [0, 0], logs

    from engine.core.events import read_all

    events = read_all(run_dir / "events.jsonl")
    assert events and events[-1]["type"] == "finished", logs
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    assert started["world_size"] == 2 and started["backend"] == fields["backend"]
    # One log event per step, written by rank 0 only; rank 0 (the one that prints the data summary) ran on machine 0.
    assert [e["step"] for e in events if e["type"] == "log"] == list(range(1, STEPS + 1)), logs
    node_logs = [(run_dir / f"node{i}.log").read_text(errors="replace") for i in range(2)]
    assert "data: " in node_logs[0] and "data: " not in node_logs[1], logs
    for e in events:
        if e["type"] == "log" and "memory" in e["payload"]:
            assert [m["rank"] for m in e["payload"]["memory"]] == [0, 1], e  # both ranks reached this step
    if fields["backend"] == "deepspeed":  # DeepSpeed trained: its optimizer states, one shard per rank
        assert deepspeed_shards(run_dir) == ["zero_pp_rank_0", "zero_pp_rank_1"], logs

    want_losses, want_adapter = single
    got = losses(events)
    for step, want in want_losses.items():
        assert got[step] == pytest.approx(want, rel=1e-3), f"step {step}: two nodes {got[step]} vs one {want}"
    mine = adapter_tensors(run_dir / "adapter")
    assert sorted(mine) == sorted(want_adapter)
    import torch

    for key, ref in want_adapter.items():
        assert torch.allclose(mine[key], ref, rtol=1e-3, atol=1e-5), key


def log_tail_of(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
