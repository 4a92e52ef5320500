"""Environment doctor: ``run_checks()`` -> [Check] for ``studio doctor`` and the page's Doctor panel.

Light: stdlib + engine.hardware / engine.workspace. Everything that needs torch runs in ``engine.doctor_probe``
as a subprocess with a timeout (argv list, explicit env), so the UI never imports torch and a hung driver
cannot hang it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_FREE_DISK_GIB = 20


@dataclass
class Check:
    name: str
    status: str  # PASS | WARN | FAIL
    detail: str
    fix: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _probe(what: str, timeout: float) -> tuple[dict | None, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    try:
        r = subprocess.run(
            [sys.executable, "-m", "engine.doctor_probe", what],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=str(ROOT),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f}s"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        return None, (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1][:300]
    return json.loads(lines[-1]), ""


def run_checks(*, timeout: float = 120.0) -> list[Check]:
    from engine import hardware, workspace

    checks: list[Check] = []
    hw = hardware.detect()
    if hw.gpus:
        for g in hw.gpus:
            checks.append(
                Check(
                    f"gpu {g.index}",
                    "PASS",
                    f"{g.name}, {g.memory_total_mib / 1024:.1f} GiB, driver {g.driver or '?'}, {g.vendor}",
                )
            )
    else:
        checks.append(
            Check(
                "gpus",
                "WARN",
                f"no GPU: {hw.reason}",
                "training runs on CPU (slow); install the NVIDIA driver / ROCm, or check CUDA_VISIBLE_DEVICES",
            )
        )
    st, err = _probe("stack", timeout)
    if st is None:
        checks.append(
            Check(
                "torch",
                "FAIL",
                f"cannot import the training stack: {err}",
                "reinstall: scripts/bootstrap or pip install -e .",
            )
        )
    else:
        build = (
            f"CUDA {st['cuda_build']}" if st["cuda_build"] else f"ROCm {st['hip_build']}" if st["hip_build"] else "CPU"
        )
        if hw.gpus and not st["cuda_available"]:
            checks.append(
                Check(
                    "torch build",
                    "FAIL",
                    f"torch {st['torch']} ({build}) cannot see the GPUs",
                    "install a torch build for your CUDA/ROCm version",
                )
            )
        else:
            checks.append(
                Check(
                    "torch build",
                    "PASS" if st["cuda_available"] or not hw.gpus else "WARN",
                    f"torch {st['torch']} ({build}), {st['device_count']} device(s)",
                )
            )
        if st["cuda_available"]:
            checks.append(
                Check(
                    "bf16",
                    "PASS" if st["bf16"] else "WARN",
                    "bf16 supported" if st["bf16"] else "no bf16 on this GPU",
                    "" if st["bf16"] else "use precision fp16",
                )
            )
            fa = st["flash_attn"]
            checks.append(
                Check(
                    "flash-attention",
                    "PASS" if fa == "importable" else "WARN",
                    f"flash_attn {fa}",
                    "" if fa == "importable" else "pip install flash-attn, or keep attn sdpa",
                )
            )
        else:
            checks.append(Check("bf16", "WARN", "no CUDA device: bf16 mixed precision only on CPU", ""))
        ops = st["deepspeed_ops"]
        if isinstance(ops, dict):
            ok = sorted(k for k, v in ops.items() if v)
            missing = sorted(k for k, v in ops.items() if not v)
            need = [k for k in ("cpu_adam", "fused_adam") if k in missing]
            checks.append(
                Check(
                    "deepspeed ops",
                    "WARN" if need else "PASS",
                    f"compatible: {', '.join(ok) or 'none'}; not: {', '.join(missing) or 'none'}",
                    f"{', '.join(need)} cannot build here: install a CUDA toolkit / ninja, or avoid offload"
                    if need
                    else "",
                )
            )
        else:
            checks.append(Check("deepspeed ops", "WARN", ops, "pip install deepspeed (needed for ZeRO)"))
        vers = ", ".join(f"{k} {v}" for k, v in st["versions"].items() if v)
        absent = [k for k, v in st["versions"].items() if not v and k not in ("flash-attn",)]
        checks.append(
            Check(
                "stack versions", "WARN" if absent else "PASS", vers, f"missing: {', '.join(absent)}" if absent else ""
            )
        )
        ar, err = _probe("allreduce", timeout)
        if ar is None:
            checks.append(
                Check(
                    "all-reduce",
                    "FAIL",
                    f"test did not finish: {err}",
                    "check NCCL (NCCL_DEBUG=INFO), firewall on 127.0.0.1, shared memory (/dev/shm)",
                )
            )
        else:
            checks.append(
                Check(
                    "all-reduce",
                    "PASS" if ar["ok"] else "FAIL",
                    f"{ar['backend']} over {ar['world_size']} process(es): "
                    f"{'sum correct' if ar['ok'] else 'wrong or missing result ' + str(ar['results'])}",
                    "" if ar["ok"] else "check NCCL_P2P_DISABLE=1 / NCCL_IB_DISABLE=1 and driver",
                )
            )
    home = workspace.home()
    probe_dir = home if home.exists() else Path.home()
    free = shutil.disk_usage(probe_dir).free / 2**30
    checks.append(
        Check(
            "disk",
            "PASS" if free >= MIN_FREE_DISK_GIB else "WARN",
            f"{free:.1f} GiB free in {probe_dir}",
            "" if free >= MIN_FREE_DISK_GIB else "free space: checkpoints of a 7B model need ~15 GiB each",
        )
    )
    return checks


def cli(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="studio doctor", description="Check GPUs, drivers, the stack and communication.")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    checks = run_checks()
    if args.json:
        print(json.dumps([c.to_dict() for c in checks], indent=2))
    else:
        for c in checks:
            print(f"[{c.status:<4}] {c.name:<16} {c.detail}" + (f"\n       fix: {c.fix}" if c.fix else ""))
    return 1 if any(c.status == "FAIL" for c in checks) else 0
