"""System metrics sampler: CPU/RAM of the run's processes, GPUs through NVML when present, one clear note when not."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import psutil
import pytest

from engine.core import events
from engine.runs import metrics


def _run_sampler(tmp_path, root_pid: int, seconds: float, gpu_ids=None, interval=0.1):
    stop = threading.Event()
    t = threading.Thread(target=metrics.sample_loop, args=(tmp_path, root_pid, gpu_ids or [], stop, interval))
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join(timeout=5)
    return metrics.read_metrics(tmp_path / "metrics.jsonl")[0]


def test_samples_cpu_and_rss_of_descendants_and_says_once_why_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_FORCE_CPU", "1")
    # a busy child with a busy grandchild: both are the run's processes
    code = (
        "import subprocess,sys; subprocess.Popen([sys.executable,'-c','x=bytearray(50*2**20)\\nwhile 1: pass']);"
        "\nwhile 1: pass"
    )
    # The sampled root stands for the run's wrapper: a process of its own, so that other children of the test
    # session (servers and browsers of session fixtures) are not counted.
    root = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess,sys; subprocess.Popen([sys.executable,'-c',{code!r}]).wait()"]
    )
    try:
        samples = _run_sampler(tmp_path, root.pid, 1.5)
    finally:
        for p in psutil.Process(root.pid).children(recursive=True) + [psutil.Process(root.pid)]:
            p.kill()
        root.wait()
    assert len(samples) >= 8
    last = samples[-1]
    assert len(last["processes"]) == 2 and last["gpus"] == []
    assert last["rss_mib"] >= 50 and last["cpu_pct"] > 20
    assert "STUDIO_FORCE_CPU" in samples[0]["gpu_note"] and not any("gpu_note" in s for s in samples[1:])
    warns = [e for e in events.read_all(tmp_path / "events.jsonl") if e["type"] == "warning"]
    assert len(warns) == 1 and warns[0]["payload"]["field"] == "metrics"


def test_no_gpu_library_gives_a_reason_not_an_error(monkeypatch):
    monkeypatch.delenv("STUDIO_FORCE_CPU", raising=False)
    sampler = metrics.GpuSampler()
    if sampler.backend:
        pytest.skip(f"this machine has GPU metrics ({sampler.backend})")
    assert sampler.reason.startswith("GPU metrics unavailable:")
    assert "NVML" in sampler.reason or "nvidia" in sampler.reason
    assert sampler.sample() == []


def test_interval_from_environment(monkeypatch):
    monkeypatch.setenv("STUDIO_METRICS_INTERVAL", "0.5")
    assert metrics.interval_s() == 0.5
    monkeypatch.setenv("STUDIO_METRICS_INTERVAL", "soon")
    assert metrics.interval_s() == 1.0


def test_torn_last_line_waits_for_the_next_read(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"ts": 1}) + "\n" + '{"ts": 2')
    got, offset = metrics.read_metrics(path)
    assert got == [{"ts": 1}]
    with open(path, "a") as fh:
        fh.write("}\n")
    assert metrics.read_metrics(path, offset)[0] == [{"ts": 2}]


@pytest.mark.gpu
def test_nvml_reports_every_gpu_field(monkeypatch):
    monkeypatch.delenv("STUDIO_FORCE_CPU", raising=False)
    sampler = metrics.GpuSampler([0])
    assert sampler.backend == "nvml", sampler.reason
    (gpu,) = sampler.sample()
    assert gpu["index"] == 0 and gpu["memory_total_mib"] > 1000 and gpu["memory_used_mib"] >= 0
    assert gpu["utilization_pct"] is not None and gpu["temperature_c"] is not None and gpu["power_w"] is not None
    t0 = time.perf_counter()
    for _ in range(20):
        sampler.sample()
    assert (time.perf_counter() - t0) / 20 < 0.05  # negligible next to a 1 s interval


def test_slurm_gpus_are_sampled_in_the_librarys_numbering():
    """A Slurm node's sampler samples the job's GPUs (SLURM_STEP_GPUS / SLURM_JOB_GPUS, by their place in the
    machine); where the node shows the job only its own GPUs, renumbered from 0, it samples those it sees."""
    assert metrics.slurm_gpu_ids({"SLURM_JOB_GPUS": "2,3"}) == [2, 3]
    assert metrics.slurm_gpu_ids({"SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1"}) == [1]
    assert metrics.slurm_gpu_ids({}) == [] and metrics.slurm_gpu_ids({"SLURM_JOB_GPUS": "(null)"}) == []
    assert metrics._visible([2, 3], 4) == [2, 3]
    assert metrics._visible([2, 3], 2) == [0, 1]
    assert metrics._visible([], 3) == [0, 1, 2]
