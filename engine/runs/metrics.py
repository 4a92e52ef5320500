"""System metrics of a live run, sampled by the run's wrapper (a thread in ``engine.runs.runner``, never the trainer),
or on a Slurm job's nodes by ``python -m engine.runs.metrics`` (``node_main``), which the batch script starts beside
the launcher on every node.

Light: stdlib, psutil, and the vendor libraries when present (nvidia-ml-py, amdsmi; rocm-smi as a command).
One JSON object per line in ``runs/<id>/metrics.jsonl`` every ``STUDIO_METRICS_INTERVAL`` seconds (default 1)::

    {"ts": 1764470000.1,
     "gpus": [{"index": 0, "memory_used_mib": 812, "memory_total_mib": 81559, "utilization_pct": 97,
               "power_w": 301.2, "temperature_c": 61}],
     "processes": [{"pid": 123, "name": "python", "cpu_pct": 98.0, "rss_mib": 512.3}],
     "cpu_pct": 98.0, "rss_mib": 512.3}

``cpu_pct``/``rss_mib`` sum the run's processes (the wrapper excluded). On Slurm the first node writes
``metrics.jsonl`` and node N ``metrics-node<N>.jsonl``, each sampling the processes of its own task; the dashboard
draws every node's, each series named by its node (``studio.monitor.NODE_FILE`` matches these names). With no GPU
library the ``gpus`` list is empty, the first line carries ``"gpu_note": "<why>"``, and one ``warning`` event says
the same, once.
Cost: one NVML query per GPU and one /proc read per process per interval, in the wrapper process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil

from engine.core import events


def interval_s() -> float:
    try:
        return max(0.1, float(os.environ.get("STUDIO_METRICS_INTERVAL", "1")))
    except ValueError:
        return 1.0


class GpuSampler:
    """Reads per-GPU memory, utilisation, power and temperature through the first library that works."""

    def __init__(self, gpu_ids: list[int] | None = None):
        self.gpu_ids = list(gpu_ids or [])
        self.backend = ""
        self.reason = ""
        self._nvml = self._amd = None
        self._handles: dict[int, object] = {}
        if os.environ.get("STUDIO_FORCE_CPU") == "1":
            self.reason = "GPU metrics off: STUDIO_FORCE_CPU=1; recording CPU and RAM only"
            return
        why = [self._try_nvml(), self._try_amdsmi(), self._try_rocm_smi()]
        if not self.backend:
            self.reason = "GPU metrics unavailable: " + "; ".join(w for w in why if w) + "; recording CPU and RAM only"

    def _try_nvml(self) -> str:
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except ImportError:
            return "nvidia-ml-py not installed"
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return f"NVML: {type(exc).__name__}"
        ids = _visible(self.gpu_ids, count)
        self._handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in ids}
        self._nvml, self.backend = pynvml, "nvml"
        return ""

    def _try_amdsmi(self) -> str:
        if self.backend:
            return ""
        try:
            import amdsmi

            amdsmi.amdsmi_init()
            handles = amdsmi.amdsmi_get_processor_handles()
        except ImportError:
            return "amdsmi not installed"
        except Exception as exc:  # noqa: BLE001
            return f"amdsmi: {type(exc).__name__}"
        ids = _visible(self.gpu_ids, len(handles))
        self._handles = {i: handles[i] for i in ids}
        self._amd, self.backend = amdsmi, "amdsmi"
        return ""

    def _try_rocm_smi(self) -> str:
        if self.backend:
            return ""
        if not shutil.which("rocm-smi"):
            return "rocm-smi not found"
        self.backend = "rocm-smi"
        return ""

    def sample(self) -> list[dict]:
        try:
            if self.backend == "nvml":
                return [self._nvml_one(i, h) for i, h in self._handles.items()]
            if self.backend == "amdsmi":
                return [self._amd_one(i, h) for i, h in self._handles.items()]
            if self.backend == "rocm-smi":
                return self._rocm_smi()
        except Exception as exc:  # noqa: BLE001 - a driver hiccup costs one sample, not the run
            return [{"error": f"{type(exc).__name__}: {exc}"}]
        return []

    def _nvml_one(self, index: int, h) -> dict:
        nv = self._nvml
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        out = {"index": index, "memory_used_mib": mem.used // 2**20, "memory_total_mib": mem.total // 2**20}
        for key, fn in (
            ("utilization_pct", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
            ("power_w", lambda: round(nv.nvmlDeviceGetPowerUsage(h) / 1000.0, 1)),
            ("temperature_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        ):
            try:
                out[key] = fn()
            except Exception:  # noqa: BLE001
                out[key] = None  # not every board reports every sensor
        return out

    def _amd_one(self, index: int, h) -> dict:
        a = self._amd
        out: dict = {"index": index}
        try:
            vram = a.amdsmi_get_gpu_vram_usage(h)
            out.update(memory_used_mib=vram.get("vram_used"), memory_total_mib=vram.get("vram_total"))
        except Exception:  # noqa: BLE001
            out.update(memory_used_mib=None, memory_total_mib=None)
        for key, fn in (
            ("utilization_pct", lambda: a.amdsmi_get_gpu_activity(h).get("gfx_activity")),
            ("power_w", lambda: _first(a.amdsmi_get_power_info(h), "current_socket_power", "average_socket_power")),
            (
                "temperature_c",
                lambda: a.amdsmi_get_temp_metric(h, a.AmdSmiTemperatureType.EDGE, a.AmdSmiTemperatureMetric.CURRENT),
            ),
        ):
            try:
                out[key] = fn()
            except Exception:  # noqa: BLE001
                out[key] = None
        return out

    def _rocm_smi(self) -> list[dict]:
        res = subprocess.run(
            ["rocm-smi", "--showmeminfo", "vram", "--showuse", "--showpower", "--showtemp", "--json"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        data = json.loads(res.stdout or "{}")
        out = []
        for key, card in sorted(data.items()):
            if not key.startswith("card"):
                continue
            index = int(key[4:])
            if self.gpu_ids and index not in self.gpu_ids:
                continue
            out.append(
                {
                    "index": index,
                    "memory_used_mib": _num(card.get("VRAM Total Used Memory (B)"), 2**20),
                    "memory_total_mib": _num(card.get("VRAM Total Memory (B)"), 2**20),
                    "utilization_pct": _num(card.get("GPU use (%)")),
                    "power_w": _num(
                        _first(card, "Average Graphics Package Power (W)", "Current Socket Graphics Package Power (W)")
                    ),
                    "temperature_c": _num(
                        _first(card, "Temperature (Sensor edge) (C)", "Temperature (Sensor junction) (C)")
                    ),
                }
            )
        return out


def _visible(gpu_ids: list[int], count: int) -> list[int]:
    """The GPUs to sample among the ``count`` the library sees: ``gpu_ids``, or all of them when none are named or
    the names are not in the library's numbering (a Slurm node that shows a job only its own GPUs, renumbered from 0,
    while SLURM_JOB_GPUS names them by their place in the machine)."""
    if not gpu_ids or any(not 0 <= i < count for i in gpu_ids):
        return list(range(count))
    return list(gpu_ids)


def _first(d: dict, *keys: str):
    for k in keys:
        if d.get(k) not in (None, "N/A"):
            return d[k]
    return None


def _num(value, divisor: float = 1.0):
    try:
        return round(float(value) / divisor, 1)
    except (TypeError, ValueError):
        return None


class ProcessSampler:
    """CPU% and RSS of every descendant of ``root_pid`` (the wrapper), which includes DDP ranks in their own
    sessions and, thanks to the wrapper being a subreaper, orphans of a dead launcher."""

    def __init__(self, root_pid: int, exclude: set[int] | None = None, *, with_root: bool = False):
        self.root = psutil.Process(root_pid)
        self.exclude = set(exclude or ())
        self.with_root = with_root  # the root is part of the run (a Slurm task's shell, or the launcher it became)
        self._known: dict[int, psutil.Process] = {}

    def sample(self) -> tuple[list[dict], float, float]:
        procs, cpu, rss = [], 0.0, 0.0
        try:
            children = ([self.root] if self.with_root else []) + self.root.children(recursive=True)
        except psutil.Error:
            children = []
        alive = {}
        for child in children:
            if child.pid in self.exclude:
                continue
            # keep the same Process object so cpu_percent measures since the previous sample
            p = self._known.get(child.pid, child)
            try:
                with p.oneshot():
                    c = p.cpu_percent(None)
                    r = p.memory_info().rss / 2**20
                    name = p.name()
            except psutil.Error:
                continue
            alive[p.pid] = p
            procs.append({"pid": p.pid, "name": name, "cpu_pct": round(c, 1), "rss_mib": round(r, 1)})
            cpu += c
            rss += r
        self._known = alive
        return procs, round(cpu, 1), round(rss, 1)


def sample_loop(
    rdir: Path,
    root_pid: int,
    gpu_ids: list[int],
    stop: threading.Event,
    interval: float | None = None,
    *,
    name: str = "metrics.jsonl",
    warn: bool = True,
    exclude: set[int] | None = None,
    with_root: bool = False,
) -> None:
    """Append one sample per interval to ``rdir/<name>`` until ``stop`` is set. ``warn``: say in the run's events
    when GPU metrics are missing (once per run: only one sampler of a run does)."""
    interval = interval or interval_s()
    path = Path(rdir) / name
    try:
        gpus = GpuSampler(gpu_ids)
        procs = ProcessSampler(root_pid, exclude, with_root=with_root)
    except Exception as exc:  # noqa: BLE001
        if warn:
            events.append_event(
                Path(rdir) / "events.jsonl", "warning", None, field="metrics", message=f"system metrics off: {exc}"
            )
        return
    if gpus.reason and warn:
        events.append_event(Path(rdir) / "events.jsonl", "warning", None, field="metrics", message=gpus.reason)
    note = gpus.reason
    while not stop.is_set():
        t0 = time.time()
        plist, cpu, rss = procs.sample()
        line = {"ts": round(t0, 3), "gpus": gpus.sample(), "processes": plist, "cpu_pct": cpu, "rss_mib": rss}
        if note:
            line["gpu_note"], note = note, ""
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
        stop.wait(max(0.0, interval - (time.time() - t0)))


def node_file(node: int) -> str:
    """The samples file of a Slurm job's node: the first node's is the run's ``metrics.jsonl``."""
    return "metrics.jsonl" if node == 0 else f"metrics-node{node}.jsonl"


def slurm_gpu_ids(env: dict[str, str] | None = None) -> list[int]:
    """The GPUs Slurm gave this node's task (physical indices, as NVML counts them); empty: none named (all)."""
    env = os.environ if env is None else env
    for key in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        ids = [x.strip() for x in env.get(key, "").split(",") if x.strip()]
        if ids and all(x.isdigit() for x in ids):
            return [int(x) for x in ids]
    return []


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def node_main(argv: list[str] | None = None) -> int:
    """``python -m engine.runs.metrics RUN_DIR --root-pid PID [--node N]``: sample PID and the processes under it
    (the job's task on this node: the shell that runs the launcher, or the launcher itself, which bash execs in
    its place; this sampler excluded) and this node's GPUs into the run folder until PID ends. The batch script
    starts it in the background of every node's task, after the task ignored SIGTERM, so a stop (``scancel
    --signal=TERM``) leaves it sampling while the trainer saves."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m engine.runs.metrics")
    p.add_argument("run_dir")
    p.add_argument("--root-pid", type=int, required=True)
    p.add_argument("--node", type=int, default=0)
    args = p.parse_args(argv)
    try:
        root = psutil.Process(args.root_pid)
    except psutil.Error:
        return 0  # the task has ended already: nothing to sample
    stop = threading.Event()
    sampler = threading.Thread(
        target=sample_loop,
        name="metrics",
        daemon=True,
        args=(Path(args.run_dir), args.root_pid, slurm_gpu_ids(), stop),
        kwargs={"name": node_file(args.node), "warn": args.node == 0, "exclude": {os.getpid()}, "with_root": True},
    )
    sampler.start()
    while _alive(root) and sampler.is_alive():
        time.sleep(min(0.5, interval_s()))
    stop.set()
    sampler.join(timeout=5)
    return 0


def read_metrics(path: str | Path, offset: int = 0) -> tuple[list[dict], int]:
    """Samples after byte ``offset`` and the new offset (a torn last line waits for the next read)."""
    return events.read_jsonl(path, offset)


if __name__ == "__main__":
    raise SystemExit(node_main())
