"""Devices on this machine, without torch: NVIDIA through NVML (nvidia-ml-py), AMD/Hygon through amdsmi or
rocm-smi when present, otherwise none (CPU). Light: stdlib + optional vendor libraries.

``detect()`` is cached per process; every failure becomes a ``reason`` string the UI shows, never an exception.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field


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


@functools.lru_cache(maxsize=1)
def detect() -> Hardware:
    """GPUs visible to this process (honours CUDA_VISIBLE_DEVICES only through the driver's own view)."""
    if os.environ.get("STUDIO_FORCE_CPU") == "1":
        return cpu_only("STUDIO_FORCE_CPU=1")
    nv = _detect_nvidia()
    if isinstance(nv, Hardware):
        return nv
    amd = _detect_rocm()
    if isinstance(amd, Hardware):
        return amd
    return cpu_only(f"GPU metrics unavailable: {nv}; {amd}")


def _detect_nvidia() -> Hardware | str:
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return f"NVIDIA driver not found ({type(exc).__name__})"
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
        return f"NVML query failed: {exc}"
    if not gpus:
        return "NVIDIA driver present but no GPU visible"
    return Hardware(gpus=gpus, vendor="nvidia")


def _detect_rocm() -> Hardware | str:
    smi = shutil.which("rocm-smi")
    if not smi:
        return "no ROCm (rocm-smi not found)"
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
        return f"rocm-smi failed: {exc}"
    gpus = []
    for key, card in sorted(data.items()):
        if not key.startswith("card"):
            continue
        total = int(card.get("VRAM Total Memory (B)", 0)) // 2**20
        name = card.get("Card series") or card.get("Card model") or key
        gpus.append(GpuInfo(index=int(key[4:]), name=str(name), memory_total_mib=total, vendor="amd", bf16=True))
    if not gpus:
        return "rocm-smi found no GPU"
    return Hardware(gpus=gpus, vendor="amd")


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
