"""Two machines for real: two network namespaces joined by a veth pair, each with its own address, run the exact
per-node commands that ``studio preview`` prints for a 2-machine x 1-process DDP spec on CPU (gloo).

The namespaces share this machine's filesystem, which stands for the shared folder (NFS, Lustre) that multi-node
runs need: the run folder, the model, the data and the Python environment at the same paths on every node. The
network between the ranks is only the veth pair: rank 1 reaches the main process at rank 0's address on it.

What proves it: both node commands exit 0; the run reports world size 2; every step's log event carries the memory
of ranks 0 and 1 (gathered by a collective at that step, so both ranks reached every step); the losses and the saved
adapter weights equal those of one process with the same global batch (DDP averages the gradients exactly; see
tests/engine/test_distributed.py for why 1e-3 relative is a safe bound).
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
from tests.helpers import demo_spec, log_tail, losses, run_trainer

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
        # tolerance below; what this test checks is the two-host DDP path, not the batch layout.
        data={"max_samples": 32, "padding_free": "off"},
        output={"report_to": ["none"]},
    )


def printed_commands(text: str) -> tuple[list[str], dict[str, str]]:
    """The per-machine commands and the environment from ``studio preview``'s text, as a user would copy them."""
    blocks = {}
    for block in text.split("\n\n"):
        head, _, body = block.partition("\n")
        blocks[head.strip()] = body
    machines = sorted(k for k in blocks if re.fullmatch(r"# machine \d+", k))
    env = dict(line.split("=", 1) for line in blocks["# environment"].splitlines() if "=" in line)
    return [blocks[k].strip() for k in machines], env


def adapter_tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted(folder.rglob("adapter_model.safetensors"))
    assert files, f"no adapter saved under {folder}"
    return load_file(str(files[0]))


def test_two_namespaces_run_the_printed_ddp_commands(two_hosts, demo_paths, tmp_path):
    (ns_a, addr_a), (ns_b, _addr_b) = two_hosts
    run_dir = tmp_path / "two-nodes"
    run_dir.mkdir()
    launch = {
        "backend": "ddp",
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
    assert printed_env.get("ACCELERATE_USE_CPU") == "true", text  # real gloo DDP on CPU (STACK-NOTES)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "MASTER_", "LOCAL_"))}
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
    assert started["world_size"] == 2
    got = losses(events)
    assert sorted(got) == list(range(1, STEPS + 1)), logs
    for e in events:
        if e["type"] == "log" and "memory" in e["payload"]:
            assert [m["rank"] for m in e["payload"]["memory"]] == [0, 1], e  # both ranks reached this step

    # The same global batch on one process: the same losses and the same saved weights.
    single_dir = tmp_path / "single"
    one = demo_spec(demo_paths, **train_overrides({"backend": "single", "device": "cpu"}, 4))
    rc, single_events = run_trainer(one, single_dir, timeout=300)
    assert rc == 0, log_tail(single_dir)
    for step, want in losses(single_events).items():
        assert got[step] == pytest.approx(want, rel=1e-3), f"step {step}: two nodes {got[step]} vs one {want}"
    mine, ref = adapter_tensors(run_dir), adapter_tensors(single_dir)
    assert sorted(mine) == sorted(ref)
    import torch

    for name in ref:
        assert torch.allclose(mine[name], ref[name], rtol=1e-3, atol=1e-5), name


def log_tail_of(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
