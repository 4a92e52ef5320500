"""Calibrate engine.plan.estimate's GPU efficiency: the share of the GPU's dense bf16 peak a real Studio run reaches.

Run on a CUDA machine (bench/gpu_check.sh does):  .venv/bin/python bench/gpu_efficiency.py
Without CUDA it exits 2.

For LoRA and full fine-tuning of the ~0.5B Llama of bench/plan_calibration.py (random init, the demo tokenizer), two
real runs each (``engine.runs.launch.build_command`` on this machine's GPU, bf16, packed sft rows of 1024 tokens),
of SHORT and LONG optimizer steps. The difference of their measured training-loop times (record.json ``duration``)
removes what does not scale with steps (warm-up, the final save); the difference of their training FLOPs (the
estimate's throughput model) over it is the FLOP rate reached, and that over the peak in engine.plan.estimate's GPU
table is the efficiency. Writes bench/results/gpu_efficiency.md; copy the figure into ``GPU_EFFICIENCY``.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SHORT, LONG = 10, 40
METHODS = {"lora r16": {"finetuning": "lora", "lora": {"rank": 16}}, "full": {"finetuning": "full"}}


def run(spec, run_dir: Path, hw) -> dict:
    from engine.plan.estimate import estimate
    from engine.runs.launch import build_command, write_plan_files
    from engine.spec.schema import save_spec

    run_dir.mkdir(parents=True, exist_ok=True)
    save_spec(spec, run_dir / "spec.yaml")
    plan = build_command(spec, run_dir, hw)
    write_plan_files(plan, run_dir)
    with open(run_dir / "train.log", "wb") as log:
        rc = subprocess.run(plan.argv, env=plan.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, timeout=1800)
    if rc.returncode != 0:
        raise SystemExit(f"run failed: {(run_dir / 'train.log').read_text()[-2000:]}")
    record = json.loads((run_dir / "record.json").read_text())
    est = estimate(spec, hardware=hw)
    return {"seconds": record["duration"]["measured_seconds"], "flops": est.train_flops, "peak": est.peak_flops}


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gpu_efficiency: no CUDA GPU")
        return 2
    os.environ.setdefault("STUDIO_HOME", tempfile.mkdtemp(prefix="studio-gpu-eff-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import plan_calibration as cal

    from engine.machine.hardware import detect
    from engine.plan.estimate import GPU_EFFICIENCY, gpu_entry
    from engine.spec.schema import parse_spec
    from engine.trainer.demo import build_demo

    paths = build_demo()
    hw = detect()
    name = torch.cuda.get_device_name(0)
    if gpu_entry(name) is None:
        print(f"gpu_efficiency: {name} is not in engine.plan.estimate's GPU table")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="gpu-eff-"))
    rows = []
    try:
        model = tmp / "model"
        cal.build_model(model)
        for f in Path(paths["model_dir"]).glob("tokenizer*"):
            shutil.copy(f, model / f.name)
        for label, method in METHODS.items():
            got = {}
            for steps in (SHORT, LONG):
                spec = parse_spec(
                    {
                        "model": {"name_or_path": str(model)},
                        "method": {"stage": "sft", **method},
                        "data": {"datasets": ["demo_alpaca"], "dataset_dir": paths["data_dir"], "template": "auto",
                                 "cutoff_len": 1024, "packing": True},
                        "train": {"max_steps": steps, "per_device_batch_size": 4, "precision": "bf16",
                                  "gradient_checkpointing": "off", "save_steps": 100000, "logging_steps": 5},
                        "launch": {"device": "cuda", "num_processes": 1},
                        "output": {"report_to": ["none"]},
                    }
                )  # fmt: skip
                got[steps] = run(spec, tmp / f"{label.replace(' ', '_')}-{steps}", hw)
            rate = (got[LONG]["flops"] - got[SHORT]["flops"]) / max(1e-9, got[LONG]["seconds"] - got[SHORT]["seconds"])
            eff = rate / got[LONG]["peak"]
            rows.append((label, got[SHORT]["seconds"], got[LONG]["seconds"], rate, eff))
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = "\n".join(
        f"| {label} | {a:.1f} | {b:.1f} | {rate / 1e12:.1f} | {100 * eff:.1f}% |" for label, a, b, rate, eff in rows
    )
    text = (
        f"# GPU efficiency on {name}\n\n{when}; ~0.5B Llama (bench/plan_calibration.py), bf16, packed rows of 1024, "
        f"batch 4; {SHORT} vs {LONG} steps. engine.plan.estimate.GPU_EFFICIENCY is {GPU_EFFICIENCY}.\n\n"
        f"| method | {SHORT} steps s | {LONG} steps s | TFLOP/s reached | efficiency |\n|---|---|---|---|---|\n"
        + table
        + "\n"
    )
    out = ROOT / "bench" / "results" / "gpu_efficiency.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
