"""Devices on this machine, without torch: NVIDIA through NVML (nvidia-ml-py), AMD/Hygon through amdsmi or
rocm-smi when present, otherwise none (CPU). Light: stdlib + optional vendor libraries.

``detect()`` is cached per process; every failure becomes a ``reason`` string the UI shows, never an exception.
``available_memory()`` reads the host memory a new process can still use (MemAvailable, cgroup limits).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.machine.messages import message


@dataclass
class GpuInfo:
    index: int
    name: str
    memory_total_mib: int
    vendor: str  # "nvidia" | "amd"
    compute_capability: str = ""  # "9.0" on NVIDIA; "" where unknown
    bf16: bool | None = None  # None: unknown
    driver: str = ""


@dataclass
class Hardware:
    gpus: list[GpuInfo] = field(default_factory=list)
    vendor: str | None = None
    reason: str = ""  # why no GPU was found (shown once to the user)
    cpu_count: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_only(reason: str = "no GPU") -> Hardware:
    return Hardware(gpus=[], vendor=None, reason=reason)


def target_machine(gpus: int, memory_gib: float = 80.0, vendor: str = "nvidia") -> Hardware:
    """A machine that is not this one, described by its GPU count and size: what ``studio preview --gpus N`` and
    ``studio validate --gpus N`` check and print a command for (a cluster node, seen from a laptop)."""
    if gpus <= 0:
        return cpu_only("a CPU-only target machine")
    cards = [
        GpuInfo(i, f"target GPU ({memory_gib:g} GiB)", int(memory_gib * 1024), vendor, bf16=True) for i in range(gpus)
    ]
    return Hardware(gpus=cards, vendor=vendor)


@functools.lru_cache(maxsize=1)
def detect() -> Hardware:
    """GPUs visible to this process (honours CUDA_VISIBLE_DEVICES only through the driver's own view)."""
    if os.environ.get("STUDIO_FORCE_CPU") == "1":
        return cpu_only(message("hardware.forced_cpu"))
    nv = _detect_nvidia()
    if isinstance(nv, Hardware):
        return nv
    amd = _detect_rocm()
    if isinstance(amd, Hardware):
        return amd
    return cpu_only(message("hardware.none", nvidia=nv, amd=amd))


def _detect_nvidia() -> Hardware | str:
    try:
        import pynvml
    except ImportError:
        return message("hardware.no_nvml")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return message("hardware.no_nvidia_driver", error=type(exc).__name__)
    try:
        driver = _s(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            except Exception:
                major, minor = 0, 0
            gpus.append(
                GpuInfo(
                    index=i,
                    name=_s(pynvml.nvmlDeviceGetName(h)),
                    memory_total_mib=mem.total // 2**20,
                    vendor="nvidia",
                    compute_capability=f"{major}.{minor}" if major else "",
                    bf16=(major >= 8) if major else None,
                    driver=driver,
                )
            )
    except Exception as exc:
        return message("hardware.nvml_failed", error=exc)
    if not gpus:
        return message("hardware.no_nvidia_gpu")
    return Hardware(gpus=gpus, vendor="nvidia")


def _detect_rocm() -> Hardware | str:
    smi = shutil.which("rocm-smi")
    if not smi:
        return message("hardware.no_rocm")
    try:
        out = subprocess.run(
            [smi, "--showproductname", "--showmeminfo", "vram", "--json"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
        data = json.loads(out)
    except Exception as exc:
        return message("hardware.rocm_failed", error=exc)
    gpus = []
    for key, card in sorted(data.items()):
        if not key.startswith("card"):
            continue
        total = int(card.get("VRAM Total Memory (B)", 0)) // 2**20
        name = card.get("Card series") or card.get("Card model") or key
        gpus.append(GpuInfo(index=int(key[4:]), name=str(name), memory_total_mib=total, vendor="amd", bf16=True))
    if not gpus:
        return message("hardware.rocm_no_gpu")
    return Hardware(gpus=gpus, vendor="amd")


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ----------------------------------------------------------------------------------------------- host memory
def available_memory(proc: str | Path = "/proc", cgroup_root: str | Path = "/sys/fs/cgroup") -> tuple[int, str] | None:
    """(bytes a new process can use, where that was read), None when unreadable: ``MemAvailable`` of
    /proc/meminfo, lowered to what this process's memory cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``)
    still allows, its reclaimable file cache not counted as used."""
    best, where = None, ""
    for line in _read_text(Path(proc) / "meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            best, where = int(line.split()[1]) * 1024, message("hardware.mem_available")
    for limit, used, inactive, name in _cgroup_memory(Path(proc), Path(cgroup_root)):
        room = max(0, limit - max(0, used - inactive))
        if best is None or room < best:
            best, where = room, message("hardware.cgroup_limit", name=name)
    return None if best is None else (best, where)


def _cgroup_memory(proc: Path, root: Path) -> list[tuple[int, int, int, str]]:
    """(limit, usage, inactive file cache, file) of this process's memory cgroup, v2 and v1, where a limit is set."""
    rel = ""
    for line in _read_text(proc / "self" / "cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and (parts[0] == "0" or "memory" in parts[1].split(",")):
            rel = parts[2].lstrip("/")
    found = []
    v2 = [root / rel, root] if rel else [root]
    for d in v2:
        limit = _read_text(d / "memory.max").strip()
        if limit.isdigit():
            stat = _stat_values(d / "memory.stat")
            found.append((int(limit), _int(_read_text(d / "memory.current")), stat.get("inactive_file", 0), str(d)))
            break
    for d in ([root / "memory" / rel] if rel else []) + [root / "memory"]:
        limit = _read_text(d / "memory.limit_in_bytes").strip()
        if limit.isdigit() and int(limit) < 1 << 60:  # "no limit" reads as a huge number
            stat = _stat_values(d / "memory.stat")
            used = _int(_read_text(d / "memory.usage_in_bytes"))
            found.append((int(limit), used, stat.get("total_inactive_file", 0), str(d)))
            break
    return found


def _stat_values(path: Path) -> dict[str, int]:
    out = {}
    for line in _read_text(path).splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _int(text: str) -> int:
    return int(text.strip()) if text.strip().isdigit() else 0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def auto_precision(device: str, gpus: list) -> str:
    """What ``train.precision: auto`` means on ``device`` with these GPUs: fp32 on CPU, bf16 on GPUs that all support
    it, else fp16. The one rule: the launch (``engine.runs.launch.resolve_precision``) and the planner use it."""
    if device == "cpu":
        return "fp32"
    return "bf16" if all(getattr(g, "bf16", None) is not False for g in gpus) else "fp16"
