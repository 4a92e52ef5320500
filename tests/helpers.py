"""Helpers shared by tests: build specs on the demo, start the real trainer subprocess, read its events."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from engine.core.events import read_all
from engine.machine.hardware import cpu_only
from engine.runs.launch import build_command, write_plan_files
from engine.spec.schema import RunSpec, load_spec, save_spec

# A run's CPU time may be this many times above or below its pre-launch estimate (tests/engine/test_estimate.py, the
# GRPO training test). Generous on purpose: the CPU constants are fitted on one 2-core machine, the fit of 2026-12-01
# at load 12-18 took 2.5-3x the CPU time of the same runs on 2026-12-04's quieter machine, and even a process's CPU
# time grows when others evict its caches; what the tests guard is the model's shape (steps, tokens and FLOPs in the
# right proportion), not a machine's speed on a given minute.
CPU_TIME_BOUND = 3.0


def demo_spec(demo_paths: dict, **overrides) -> RunSpec:
    """The demo LoRA spec with group overrides merged in, e.g. train={"max_steps": 4}."""
    data = load_spec(demo_paths["example_spec"]).model_dump(mode="json")
    for group, values in overrides.items():
        if isinstance(values, dict) and isinstance(data.get(group), dict):
            merged = dict(data[group])
            for key, value in values.items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = {**merged[key], **value}
                else:
                    merged[key] = value
            data[group] = merged
        else:
            data[group] = values
    return RunSpec.model_validate(data)


def start_trainer(spec: RunSpec, run_dir: Path, hardware=None) -> subprocess.Popen:
    """The real launch path (engine.runs.launch: the trainer, under accelerate launch for several processes), on CPU
    unless ``hardware`` is given, in its own process group."""
    run_dir.mkdir(parents=True, exist_ok=True)
    save_spec(spec, run_dir / "spec.yaml")
    plan = build_command(spec, run_dir, hardware if hardware is not None else cpu_only())
    write_plan_files(plan, run_dir)
    log = open(run_dir / "train.log", "wb")
    return subprocess.Popen(
        plan.argv,
        env=plan.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=str(Path(__file__).resolve().parents[1]),
    )


def run_trainer(spec: RunSpec, run_dir: Path, timeout: float = 300, hardware=None) -> tuple[int, list[dict]]:
    proc = start_trainer(spec, run_dir, hardware)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise AssertionError(f"trainer timed out; log tail:\n{log_tail(run_dir)}") from None
    return rc, read_all(run_dir / "events.jsonl")


def wait_for_event(run_dir: Path, predicate, timeout: float = 120) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for event in read_all(run_dir / "events.jsonl"):
            if predicate(event):
                return event
        time.sleep(0.1)
    raise AssertionError(f"no matching event within {timeout}s; log tail:\n{log_tail(run_dir)}")


def log_tail(run_dir: Path, n: int = 40) -> str:
    path = run_dir / "train.log"
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


def deepspeed_shards(run_dir: Path) -> list[str]:
    """The ranks whose DeepSpeed ZeRO optimizer states the run's checkpoints hold (``zero_pp_rank_<i>``): proof that
    DeepSpeed itself trained, not a fallback to plain DDP that would reach the same losses."""
    files = run_dir.glob("checkpoints/checkpoint-*/global_step*/*optim_states.pt")
    return sorted({f.name.split("_mp_rank")[0] for f in files})


def losses(events: list[dict]) -> dict[int, float]:
    return {e["step"]: e["payload"]["loss"] for e in events if e["type"] == "log"}


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process remains in the process group."""
    import psutil

    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def stop_and_wait(proc: subprocess.Popen, timeout: float = 120) -> None:
    """SIGTERM the run's process group and wait until every process of it is gone. accelerate's launcher itself
    dies on SIGTERM at once; the trainer under it saves a checkpoint first, so wait for the whole group."""
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=timeout)
    deadline = time.time() + timeout
    while group_alive(proc.pid):
        if time.time() > deadline:
            raise AssertionError("run processes still alive after SIGTERM")
        time.sleep(0.2)


def wait_for(cond, timeout: float = 30.0, every: float = 0.1):
    """Poll ``cond`` until it returns something truthy (which is returned) or fail after ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {cond}")


def run_bench_quick(script: str, out: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """``python bench/<script> --quick --out <out>`` from the repo root, one thread per op, its exit asserted 0 (with
    the output's tail in the message): how each benchmark's end-to-end test runs it."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "bench" / script), "--quick", "--out", str(out)],
        cwd=str(root),
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def safetensors_shapes(folder: Path) -> dict[str, list[int]]:
    """Every tensor's shape in a folder's safetensors files, read from their headers (8-byte length, then JSON)."""
    shapes: dict[str, list[int]] = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        shapes.update({k: v["shape"] for k, v in header.items() if k != "__metadata__"})
    return shapes
