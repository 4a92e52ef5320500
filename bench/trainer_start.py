"""How long a short run's trainer process takes, start to exit, with what it does not use left unimported and not.

Usage: .venv/bin/python bench/trainer_start.py [--repeats 3] [--steps 3] [--out FILE.md]

A temporary STUDIO_HOME with the demo built; the demo LoRA SFT spec with --steps steps, no checkpoint. Each repeat
starts ``python -m engine.trainer.train`` twice, alternating which goes first: this checkout as it is (``lean``:
``engine.trainer.lean`` leaves bitsandbytes unimported for a model that is not quantized) and with
``STUDIO_LEAN_IMPORTS=off`` (``baseline``), in the environment the launcher gives a one-process CPU run
(``engine.runs.launch.simple_launcher_env``). Wall seconds from start to exit, and the child's user + system CPU
seconds from ``os.wait4``'s resource usage (the kernel's count, not the trainer's). The training itself is a fraction
of a second: what is measured is the start (imports, model and data loading) and the end (saving). Each run must end
with its ``finished`` event. The two variants share the machine, so compare them within one run of this script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIANTS = {"lean": {}, "baseline (STUDIO_LEAN_IMPORTS=off)": {"STUDIO_LEAN_IMPORTS": "off"}}
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CUDA_VISIBLE_DEVICES": "",
}


def one_run(home: Path, spec: Path, run_dir: Path, extra: dict) -> tuple[float, float]:
    """(wall s, CPU s) of one trainer process; raises when it did not finish."""
    from engine.runs.launch import simple_launcher_env

    env = {
        **os.environ,
        **OFFLINE,
        **simple_launcher_env("cpu", "fp32"),
        "STUDIO_HOME": str(home),
        "STUDIO_DEVICE": "cpu",
        "STUDIO_PRECISION": "fp32",
        "PYTHONPATH": str(ROOT),
        **extra,
    }
    run_dir.mkdir(parents=True)
    t0 = time.monotonic()
    with open(run_dir / "train.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine.trainer.train", str(spec), "--run-dir", str(run_dir)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    if proc.returncode != 0 or not events or events[-1].get("type") != "finished":
        raise RuntimeError(f"{run_dir} did not finish: {(run_dir / 'train.log').read_text()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="trainer-start-") as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, **OFFLINE, "STUDIO_HOME": str(home)}
        demo = [sys.executable, "-m", "engine.cli", "demo"]
        subprocess.run(demo, cwd=ROOT, env=env, check=True, capture_output=True)
        os.environ["STUDIO_HOME"] = str(home)
        from engine.core.workspace import demo_paths
        from engine.spec.schema import load_spec, save_spec

        spec = load_spec(demo_paths()["example_spec"])
        spec = spec.model_copy(
            update={"train": spec.train.model_copy(update={"max_steps": args.steps, "save_steps": 10_000})}
        )
        spec_path = Path(tmp) / "spec.yaml"
        save_spec(spec, spec_path)
        for i in range(args.repeats):
            order = list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                run_dir = Path(tmp) / f"run-{i}-{list(VARIANTS).index(name)}"
                rows[name].append(one_run(home, spec_path, run_dir, VARIANTS[name]))
    lines = [
        f"Trainer process of a {args.steps}-step demo LoRA SFT run, start to exit, {args.repeats} repeats alternating "
        f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end)",
        "",
        "| variant | wall s (median) | CPU s (median) | wall s per repeat | CPU s per repeat |",
        "|---|---:|---:|---|---|",
    ]
    for name, vals in rows.items():
        walls, cpus = [w for w, _ in vals], [c for _, c in vals]
        lines.append(
            f"| {name} | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f} | "
            f"{' / '.join(f'{w:.2f}' for w in walls)} | {' / '.join(f'{c:.2f}' for c in cpus)} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
