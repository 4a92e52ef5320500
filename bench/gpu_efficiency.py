"""Calibrate engine.plan.estimate's GPU efficiency: the share of the GPU's dense bf16 peak a real Studio run reaches.

Run on a CUDA machine (bench/gpu_check.sh does):  .venv/bin/python bench/gpu_efficiency.py [--runs lora,full,...]
Without CUDA it exits 2.

For LoRA and full fine-tuning of the ~0.5B Llama of bench/plan_calibration.py (random init, the demo tokenizer), two
real runs each (``engine.runs.launch.build_command`` on this machine's GPU, bf16, packed sft rows of 1024 tokens),
of SHORT and LONG optimizer steps. The difference of their measured training-loop times (record.json ``duration``)
removes what does not scale with steps (warm-up, the final save); the difference of their training FLOPs (the
estimate's throughput model) over it is the FLOP rate reached, and that over the peak in engine.plan.estimate's GPU
table is the efficiency. Writes bench/results/gpu_efficiency.md, row by row as each pair ends (a lease's time limit
keeps what finished); copy the figure into ``GPU_EFFICIENCY``.

Runs (``--runs``, in the order given): ``lora`` and ``full``, the pairs above; ``lora-8b``, the LoRA pair on a
Llama-3-8B-shaped model (random init on the GPU), the size users train and the one the constant is meant for;
``grpo``, one GRPO run of the ~0.5B model on the demo's arithmetic prompts (random weights: every completion runs to
its maximum length), whose estimated training-loop time (engine.plan.grpo_time, record.json) is set beside the
measured one.
"""

from __future__ import annotations

import argparse
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
LORA = {"finetuning": "lora", "lora": {"rank": 16}}
# run name -> (label, model shape, method, (short, long) steps); "grpo" is handled apart. The 8B pair is shorter:
# each of its steps takes seconds, and a lease's minutes are few
PAIRS = {
    "lora": ("lora r16", "0.5b", LORA, (SHORT, LONG)),
    "full": ("full", "0.5b", {"finetuning": "full"}, (SHORT, LONG)),
    "lora-8b": ("lora r16, 8B", "8b", LORA, (5, 15)),
}
RUNS = (*PAIRS, "grpo")
# Llama-3-8B's shape (vocabulary included); the ~0.5B shape is plan_calibration.CONFIG
SHAPE_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 8192, "rope_theta": 500000.0, "tie_word_embeddings": False, "rms_norm_eps": 1e-05,
    "torch_dtype": "bfloat16",
}  # fmt: skip
# a regex reward: the math reward needs math-verify, which a lent machine may lack; a reward's cost is not timed
GRPO = {
    "stage": "grpo", "finetuning": "lora", "lora": {"rank": 16},
    "grpo": {"num_generations": 4, "max_prompt_length": 128, "max_completion_length": 64, "beta": 0.04,
             "loss_type": "dapo",
             "rewards": [{"kind": "regex", "name": "number_only", "pattern": r"\s*-?\d+\s*", "weight": 1.0}]},
}  # fmt: skip
GRPO_STEPS, GRPO_BATCH = 8, 8


def bench_data(tmp: Path, demo_data: Path) -> str:
    """A dataset dir with ``bench_alpaca``: long answers made of the demo's, enough packed rows of 1024 for the
    longest run to see each once (the demo's own 360 short rows pack into 9, fewer than one step of some runs)."""
    import random

    rows = json.loads((demo_data / "demo_alpaca.json").read_text(encoding="utf-8"))
    rng = random.Random(0)
    out = [
        {"instruction": r["instruction"], "input": "", "output": " ".join(x["output"] for x in rng.sample(rows, 12))}
        for r in (rng.choice(rows) for _ in range(2400))
    ]
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "bench_alpaca.json").write_text(json.dumps(out), encoding="utf-8")
    columns = {"prompt": "instruction", "query": "input", "response": "output"}
    info = {"bench_alpaca": {"file_name": "bench_alpaca.json", "formatting": "alpaca", "columns": columns}}
    (data / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return str(data)


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
    steps = record["duration"]["steps"]
    if steps != spec.train.max_steps:  # a health rule stopped it: its time says nothing of the steps asked for
        tail = (run_dir / "train.log").read_text(errors="replace")[-1500:]
        raise SystemExit(f"{run_dir.name}: stopped at step {steps} of {spec.train.max_steps}\n{tail}")
    return {
        "seconds": record["duration"]["measured_seconds"],
        "estimated": record["duration"]["estimated_seconds"],
        "flops": est.train_flops,
        "peak": est.peak_flops,
        "generation": est.generation_seconds,
    }


def build_model(model: Path, size: str, tokenizer_dir: Path) -> None:
    """The ~0.5B calibration model, or the 8B shape initialised on the GPU (on the CPU it takes minutes)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if size == "0.5b":
        import plan_calibration as cal

        cal.build_model(model)
    else:
        torch.manual_seed(0)
        with torch.device("cuda"):
            m = AutoModelForCausalLM.from_config(AutoConfig.for_model(**SHAPE_8B), dtype=torch.bfloat16)
        m.save_pretrained(str(model))
        del m
        torch.cuda.empty_cache()
    for f in [*tokenizer_dir.glob("tokenizer*"), tokenizer_dir / "chat_template.jinja"]:
        if f.exists():
            shutil.copy(f, model / f.name)


def spec_for(model: Path, data_dir: str, method: dict, steps: int, batch: int = 4, dataset: str = "bench_alpaca"):
    from engine.spec.schema import parse_spec

    stage = method.get("stage", "sft")
    return parse_spec(
        {
            "model": {"name_or_path": str(model)},
            "method": {"stage": stage, **method},
            "data": {"datasets": [dataset], "dataset_dir": data_dir, "template": "auto",
                     **({"cutoff_len": 1024, "packing": True} if stage == "sft" else {})},
            "train": {"max_steps": steps, "per_device_batch_size": batch, "gradient_accumulation": 1,
                      "precision": "bf16", "gradient_checkpointing": "off", "save_steps": 100000, "logging_steps": 5},
            # random weights: a first gradient norm above the default limit would stop the run, not measure it
            "health": {"grad_norm": "note", "loss_spike": "note"},
            "launch": {"device": "cuda", "num_processes": 1},
            "output": {"report_to": ["none"]},
        }
    )  # fmt: skip


def write(name: str, pairs: list, grpo: list) -> str:
    from engine.plan.estimate import GPU_EFFICIENCY

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (
        f"# GPU efficiency on {name}\n\n{when}; bf16, packed rows of 1024, batch 4 x 1 (a "
        "dataset of 2,400 long answers made of the demo's: no step wraps an epoch), no gradient checkpointing; "
        "a short and a long run per row. Models: ~0.5B Llama (bench/plan_calibration.py) and a Llama-3-8B shape, "
        f"random init. engine.plan.estimate.GPU_EFFICIENCY is {GPU_EFFICIENCY}.\n\n"
        "| method | steps | short s | long s | TFLOP/s reached | efficiency |\n|---|---|---|---|---|---|\n"
        + "".join(
            f"| {lb} | {st[0]} vs {st[1]} | {a:.1f} | {b:.1f} | {r / 1e12:.1f} | {100 * e:.1f}% |\n"
            for lb, st, a, b, r, e in pairs
        )
    )
    if grpo:
        text += (
            f"\nGRPO (~0.5B, LoRA r16, {GRPO_STEPS} steps of {GRPO_BATCH} completions, groups of "
            f"{GRPO['grpo']['num_generations']}, completions of {GRPO['grpo']['max_completion_length']} tokens): the "
            "training loop's time as estimated before launch (record.json) and as measured.\n\n"
            "| run | estimated s | of which generating s | measured s | error |\n|---|---|---|---|---|\n"
            + "".join(f"| {lb} | {e:.1f} | {g:.1f} | {m:.1f} | {100 * (e - m) / m:+.0f}% |\n" for lb, e, g, m in grpo)
        )
    out = ROOT / "bench" / "results" / "gpu_efficiency.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="lora,full", help=f"comma-separated, in order, of: {', '.join(RUNS)}")
    args = ap.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        ap.error(f"--runs: unknown {', '.join(unknown)}; choose from {', '.join(RUNS)}")
    import torch

    if not torch.cuda.is_available():
        print("gpu_efficiency: no CUDA GPU")
        return 2
    os.environ.setdefault("STUDIO_HOME", tempfile.mkdtemp(prefix="studio-gpu-eff-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from engine.machine.hardware import detect
    from engine.plan.estimate import gpu_entry
    from engine.trainer.demo import build_demo

    paths = build_demo()
    hw = detect()
    name = torch.cuda.get_device_name(0)
    if gpu_entry(name) is None:
        print(f"gpu_efficiency: {name} is not in engine.plan.estimate's GPU table")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="gpu-eff-"))
    pairs, grpo = [], []
    models: dict[str, Path] = {}

    def model_for(size: str) -> Path:
        if size not in models:
            for old in models.values():  # one model on disk at a time: the 8B one is 16 GB
                shutil.rmtree(old, ignore_errors=True)
            models.clear()
            models[size] = tmp / f"model-{size}"
            build_model(models[size], size, Path(paths["model_dir"]))
        return models[size]

    try:
        data = bench_data(tmp, Path(paths["data_dir"]))
        for key in runs:
            if key == "grpo":
                spec = spec_for(model_for("0.5b"), paths["data_dir"], GRPO, GRPO_STEPS, GRPO_BATCH, "grpo_arith")
                got = run(spec, tmp / "grpo", hw)
                grpo.append(("grpo lora r16", got["estimated"], got["generation"] or 0.0, got["seconds"]))
                print(grpo[-1], flush=True)
            else:
                label, size, method, (short, long) = PAIRS[key]
                got = {st: run(spec_for(model_for(size), data, method, st), tmp / f"{key}-{st}", hw)
                       for st in (short, long)}  # fmt: skip
                rate = (got[long]["flops"] - got[short]["flops"]) / max(
                    1e-9, got[long]["seconds"] - got[short]["seconds"]
                )
                eff = rate / got[long]["peak"]
                pairs.append((label, (short, long), got[short]["seconds"], got[long]["seconds"], rate, eff))
                print(pairs[-1], flush=True)
            write(name, pairs, grpo)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(write(name, pairs, grpo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
