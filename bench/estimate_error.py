"""The time estimate (engine.plan.estimate) against real demo runs on this machine's CPU.

Run:  .venv/bin/python bench/estimate_error.py              -> bench/results/estimate_error.md
      .venv/bin/python bench/estimate_error.py --calibrate  -> bench/results/estimate_calibration.md
      .venv/bin/python bench/estimate_error.py --only grpo --out FILE  -> the runs named grpo only

Each run is a real Studio run on the demo workspace (tiny Llama, demo datasets), started the way Studio starts one
(``engine.runs.launch.build_command``: engine.trainer.train, CPU, one thread per process). The
trainer writes the pre-launch estimate into record.json and, at the end, the measured duration of its training loop
(``trainer.train()``, evaluations and the final checkpoint included; process start and model load excluded) beside it:
its wall time and its process CPU time. The CPU estimate is what one idle core takes, so it is fitted and checked
against the CPU time; a shared machine stretches the wall time (the table shows both and the load average).

--calibrate fits the CPU model's constants by least squares over the CALIBRATION runs: measured seconds (the
loop's CPU time) = CPU_RUN_SECONDS + steps x CPU_STEP_SECONDS + FLOPs / CPU_FLOPS (the FLOPs from the estimate's
throughput model); copy the fitted figures into engine/plan/estimate.py. The default mode runs CHECK (other shapes,
methods and stages than the calibration's) and records estimate vs measured. The machine is shared: a busy CPU makes
a run slower in wall time than its estimate; the table keeps the load average seen at each run's start. Light at
import; runs in subprocesses.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CALIBRATION = {
    "lora b4 x 40 steps": {"train": {"max_steps": 40}},
    "lora b16 x 30 steps": {"train": {"max_steps": 30, "per_device_batch_size": 16}},
    "lora b1 x 60 steps": {"train": {"max_steps": 60, "per_device_batch_size": 1}},
    "full b8 x 30 steps": {"method": {"finetuning": "full"}, "train": {"max_steps": 30, "per_device_batch_size": 8}},
    "full b1 x 80 steps": {"method": {"finetuning": "full"}, "train": {"max_steps": 80, "per_device_batch_size": 1}},
    "lora b8 x 60 steps": {"train": {"max_steps": 60, "per_device_batch_size": 8}},
}
CHECK = {
    "lora 2 epochs b4 (100 steps)": {"train": {"max_steps": -1, "num_epochs": 2}},
    "lora packed 3 epochs b2": {"data": {"packing": True}, "train": {"max_steps": -1, "num_epochs": 3,
                                                                     "per_device_batch_size": 2}},
    "full b4 x 50 steps": {"method": {"finetuning": "full"}, "train": {"max_steps": 50}},
    "pt lora cutoff 128 x 30 steps": {"method": {"stage": "pt"}, "data": {"datasets": ["demo_pretrain"],
                                      "cutoff_len": 128}, "train": {"max_steps": 30}},
}  # fmt: skip
# stage grpo (engine.plan.grpo_time): the demo's arithmetic prompts, the math example's rewards; completion lengths
# and steps varied so that decoding's share differs from run to run
GRPO = {
    "stage": "grpo",
    "grpo": {
        "num_generations": 4,
        "max_prompt_length": 128,
        "beta": 0.04,
        "loss_type": "dapo",
        "rewards": [
            {"kind": "math", "weight": 1.0},
            {"kind": "regex", "name": "number_only", "pattern": r"\s*-?\d+\s*", "weight": 0.5},
        ],
    },
}
for _c, _s, _g, _b in ((8, 20, 4, 8), (48, 8, 4, 8), (8, 30, 4, 8), (96, 4, 4, 8), (24, 10, 8, 16), (64, 6, 2, 4)):
    CHECK[f"grpo completions {_c} x {_s} steps, group {_g} of batch {_b}"] = {
        "method": {**GRPO, "grpo": {**GRPO["grpo"], "max_completion_length": _c, "num_generations": _g}},
        "data": {"datasets": ["grpo_arith"]}, "train": {"max_steps": _s, "per_device_batch_size": _b,
                                                         "learning_rate": 1e-3},
    }  # fmt: skip


def spec_for(overrides: dict):
    from engine.core.workspace import demo_paths
    from engine.spec.schema import RunSpec, load_spec

    data = load_spec(demo_paths()["example_spec"]).model_dump(mode="json")
    data["train"].update({"save_steps": 100000, "logging_steps": 1})
    data["output"]["report_to"] = ["none"]
    for group, values in overrides.items():
        for key, value in values.items():
            if isinstance(value, dict):
                data[group][key] = {**data[group][key], **value}
            else:
                data[group][key] = value
    return RunSpec.model_validate(data)


def run_once(spec, run_dir: Path, timeout: float = 900) -> dict:
    """A real run; returns record.json's estimate and duration, with the estimate's FLOPs computed again here."""
    from engine.machine.hardware import cpu_only
    from engine.plan.estimate import estimate
    from engine.runs.launch import build_command, write_plan_files
    from engine.spec.schema import save_spec

    run_dir.mkdir(parents=True, exist_ok=True)
    save_spec(spec, run_dir / "spec.yaml")
    plan = build_command(spec, run_dir, cpu_only())
    write_plan_files(plan, run_dir)
    load = os.getloadavg()[0]
    with open(run_dir / "train.log", "wb") as log:
        rc = subprocess.run(plan.argv, env=plan.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, timeout=timeout)
    if rc.returncode != 0:
        raise SystemExit(f"run failed: {(run_dir / 'train.log').read_text()[-2000:]}")
    record = json.loads((run_dir / "record.json").read_text())
    cpu_spec = spec.model_copy(deep=True)
    cpu_spec.launch.device = "cpu"
    est = estimate(cpu_spec, hardware=cpu_only())
    return {
        "estimated": record["duration"]["estimated_seconds"],
        "measured": record["duration"]["cpu_seconds"],
        "wall": record["duration"]["measured_seconds"],
        "steps": record["duration"]["steps"],
        "estimated_steps": record["estimate"]["steps"],
        "flops": est.train_flops,
        "load": load,
    }


def fit(rows: list[dict]) -> tuple[float, float, float]:
    """Least squares of measured = c0 + c1 x steps + c2 x FLOPs, every constant kept at 0 or above (a negative one
    is dropped and the rest fitted again: no time is negative); returns (run seconds, step seconds, FLOP/s)."""
    import numpy as np

    y = np.array([r["measured"] for r in rows])
    cols = [np.ones(len(rows)), np.array([float(r["steps"]) for r in rows]), np.array([r["flops"] for r in rows])]
    keep = [0, 1, 2]
    while True:
        got, *_ = np.linalg.lstsq(np.stack([cols[i] for i in keep], axis=1), y, rcond=None)
        if all(g >= 0 for g in got) or len(keep) == 1:
            break
        keep.pop(int(np.argmin(got)))
    c = [0.0, 0.0, 0.0]
    for i, g in zip(keep, got):
        c[i] = max(0.0, float(g))
    return c[0], c[1], 1.0 / c[2] if c[2] > 0 else float("inf")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrate", action="store_true", help="fit the CPU constants instead of checking them")
    ap.add_argument("--out", help="results file (default by mode, under bench/results)")
    ap.add_argument("--only", help="only the runs whose name holds this text (e.g. grpo)")
    args = ap.parse_args(argv)
    os.environ.setdefault("STUDIO_HOME", tempfile.mkdtemp(prefix="studio-estimate-"))
    for k, v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(k, v)
    os.environ["OMP_NUM_THREADS"] = "1"
    from engine.trainer.demo import build_demo

    build_demo()
    configs = CALIBRATION if args.calibrate else CHECK
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="estimate-runs-"))
    try:
        for name, overrides in configs.items():
            if args.only and args.only not in name:
                continue
            got = run_once(spec_for(overrides), tmp / f"run{len(rows)}")
            got["name"] = name
            rows.append(got)
            print(json.dumps(got), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = (
        f"{when}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one thread per process; "
        "demo model (engine/trainer/demo.py), CPU, real runs started as Studio starts them.\n\n"
    )
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    if args.calibrate:
        c0, c1, rate = fit(rows)
        table = "\n".join(
            f"| {r['name']} | {r['steps']} | {r['flops']:.3g} | {r['measured']:.2f} | "
            f"{c0 + c1 * r['steps'] + r['flops'] / rate:.2f} | {r['wall']:.2f} | {r['load']:.1f} |"
            for r in rows
        )
        text = (
            "# CPU time-estimate calibration\n\n" + head
            + "measured = CPU_RUN_SECONDS + steps x CPU_STEP_SECONDS + FLOPs / CPU_FLOPS, least squares:\n\n"
            f"- CPU_RUN_SECONDS = {c0:.3f}\n- CPU_STEP_SECONDS = {c1:.4f}\n- CPU_FLOPS = {rate:.3g}\n\n"
            "| run | steps | model FLOPs | CPU s | fitted s | wall s | load avg |\n|---|---|---|---|---|---|---|\n"
            + table + "\n"
        )  # fmt: skip
        out = Path(args.out) if args.out else results / "estimate_calibration.md"
    else:
        errs = [100.0 * (r["estimated"] - r["measured"]) / r["measured"] for r in rows]
        table = "\n".join(
            f"| {r['name']} | {r['estimated_steps']} / {r['steps']} | {r['estimated']:.2f} | {r['measured']:.2f} | "
            f"{e:+.0f}% | {r['wall']:.2f} | {r['load']:.1f} |"
            for r, e in zip(rows, errs)
        )
        worst = max(abs(e) for e in errs)
        text = (
            "# Time estimate vs measured (CPU)\n\n" + head
            + "Estimated: record.json's estimate (engine.plan.estimate, made before training). Measured: the "
            "training loop's CPU time in the same record.json (its wall time beside it). Runs differ from the "
            "calibration's (bench/results/estimate_calibration.md).\n\n"
            "| run | steps est. / real | estimated s | CPU s | error | wall s | load avg |\n"
            "|---|---|---|---|---|---|---|\n"
            + table + f"\n\nWorst error: {worst:.0f}%.\n"
        )  # fmt: skip
        out = Path(args.out) if args.out else results / "estimate_error.md"
    out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
