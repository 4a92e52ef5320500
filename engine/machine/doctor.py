"""Environment doctor: ``run_checks()`` -> [Check] for ``studio doctor`` and the page's Doctor panel.

Light: stdlib + engine.machine.hardware / engine.core.workspace. Everything that needs torch runs in
``engine.trainer.doctor_probe`` as a subprocess with a timeout (argv list, explicit env), so the UI never imports
torch and a hung driver cannot hang it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.machine.messages import message

ROOT = Path(__file__).resolve().parents[2]
MIN_FREE_DISK_GIB = 20


@dataclass
class Check:
    """name, detail and fix are engine.machine.messages Messages (English text the page can translate)."""

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
            [sys.executable, "-m", "engine.trainer.doctor_probe", what],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=str(ROOT),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, message("doctor.timeout", seconds=timeout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        lines = r.stderr.strip().splitlines()
        return None, lines[-1][:300] if lines else message("doctor.exit_code", code=r.returncode)
    return json.loads(lines[-1]), ""


def run_checks(*, timeout: float = 120.0) -> list[Check]:
    from engine.core import workspace
    from engine.machine import hardware

    checks: list[Check] = []
    hw = hardware.detect()
    if hw.gpus:
        for g in hw.gpus:
            checks.append(
                Check(
                    message("doctor.name_gpu", index=g.index),
                    "PASS",
                    message(
                        "doctor.gpu",
                        name=g.name,
                        gib=g.memory_total_mib / 1024,
                        driver=g.driver or "?",
                        vendor=g.vendor,
                    ),
                )
            )
    else:
        checks.append(
            Check(
                message("doctor.name_gpus"),
                "WARN",
                message("doctor.no_gpu", reason=hw.reason),
                message("doctor.no_gpu_fix"),
            )
        )
    st, err = _probe("stack", timeout)
    if st is None:
        checks.append(
            Check(
                message("doctor.name_torch"),
                "FAIL",
                message("doctor.no_stack", error=err),
                message("doctor.no_stack_fix"),
            )
        )
    else:
        build = (
            f"CUDA {st['cuda_build']}" if st["cuda_build"] else f"ROCm {st['hip_build']}" if st["hip_build"] else "CPU"
        )
        if hw.gpus and not st["cuda_available"]:
            checks.append(
                Check(
                    message("doctor.name_torch_build"),
                    "FAIL",
                    message("doctor.torch_blind", torch=st["torch"], build=build),
                    message("doctor.torch_blind_fix"),
                )
            )
        else:
            checks.append(
                Check(
                    message("doctor.name_torch_build"),
                    "PASS" if st["cuda_available"] or not hw.gpus else "WARN",
                    message("doctor.torch", torch=st["torch"], build=build, n=st["device_count"]),
                )
            )
        if st["cuda_available"]:
            checks.append(
                Check(
                    message("doctor.name_bf16"),
                    "PASS" if st["bf16"] else "WARN",
                    message("doctor.bf16_yes") if st["bf16"] else message("doctor.bf16_no"),
                    "" if st["bf16"] else message("doctor.bf16_fix"),
                )
            )
            fa = st["flash_attn"]
            checks.append(
                Check(
                    message("doctor.name_flash"),
                    "PASS" if fa == "importable" else "WARN",
                    message("doctor.flash_ok") if fa == "importable" else message("doctor.flash_missing", state=fa),
                    "" if fa == "importable" else message("doctor.flash_fix"),
                )
            )
        else:
            checks.append(Check(message("doctor.name_bf16"), "WARN", message("doctor.bf16_cpu"), ""))
        ops = st["deepspeed_ops"]
        if isinstance(ops, dict):
            ok = sorted(k for k, v in ops.items() if v)
            missing = sorted(k for k, v in ops.items() if not v)
            need = [k for k in ("cpu_adam", "fused_adam") if k in missing]
            checks.append(
                Check(
                    message("doctor.name_ds_ops"),
                    "WARN" if need else "PASS",
                    message("doctor.ds_ops", ok=", ".join(ok) or "none", missing=", ".join(missing) or "none"),
                    message("doctor.ds_ops_fix", need=", ".join(need)) if need else "",
                )
            )
        else:
            checks.append(Check(message("doctor.name_ds_ops"), "WARN", ops, message("doctor.ds_missing_fix")))
        vers = ", ".join(f"{k} {v}" for k, v in st["versions"].items() if v)
        absent = [k for k, v in st["versions"].items() if not v and k not in ("flash-attn",)]
        checks.append(
            Check(
                message("doctor.name_versions"),
                "WARN" if absent else "PASS",
                vers,
                message("doctor.versions_missing", names=", ".join(absent)) if absent else "",
            )
        )
        ar, err = _probe("allreduce", timeout)
        if ar is None:
            checks.append(
                Check(
                    message("doctor.name_allreduce"),
                    "FAIL",
                    message("doctor.allreduce_unfinished", error=err),
                    message("doctor.allreduce_unfinished_fix"),
                )
            )
        else:
            checks.append(
                Check(
                    message("doctor.name_allreduce"),
                    "PASS" if ar["ok"] else "FAIL",
                    message("doctor.allreduce_ok", backend=ar["backend"], n=ar["world_size"])
                    if ar["ok"]
                    else message(
                        "doctor.allreduce_wrong", backend=ar["backend"], n=ar["world_size"], results=ar["results"]
                    ),
                    "" if ar["ok"] else message("doctor.allreduce_wrong_fix"),
                )
            )
    home = workspace.home()
    probe_dir = home if home.exists() else Path.home()
    free = shutil.disk_usage(probe_dir).free / 2**30
    checks.append(
        Check(
            message("doctor.name_disk"),
            "PASS" if free >= MIN_FREE_DISK_GIB else "WARN",
            message("doctor.disk", free=free, path=probe_dir),
            "" if free >= MIN_FREE_DISK_GIB else message("doctor.disk_fix"),
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
