"""GRPO steps per second: Studio's stage grpo (a real run) against a plain TRL GRPOTrainer script, and their rewards.

Run:  .venv/bin/python bench/grpo_throughput.py [--quick] [--repeats 5] [--steps 30] [--warmup 3]
      .venv/bin/python bench/grpo_throughput.py --model smollm2 --completion-length 24 --repeats 2 --steps 8 \
          --warmup 2 --out bench/results/real_model_grpo

Both sides train assets/examples/grpo_math.yaml's job on the demo model, on CPU, one thread per process: LoRA r8
all-linear, the grpo_arith prompts, group size 4, completions of 8 tokens, 8 completions per step, beta 0.04, loss
dapo, learning rate 1e-3 cosine, seed 42, two rewards (math-verify against the answer, weight 1; "the number
only" regex, weight 0.5), report_to tensorboard. Studio's side is the run a user starts: the spec saved in a run
folder, the command and environment engine.runs.launch.build_command gives, ``-m engine.trainer.train``
(its events, health rules, sample completions). The baseline is bench/plain_grpo.py (TRL + PEFT only, its reward
functions written there) under the same launcher and environment. The example's save_steps is raised past the
last step on both sides so no checkpoint lands in the window. Runs alternate Studio, plain, Studio, plain, ... so
the machine's load hits both alike.

--model: ``demo`` (the example's tiny demo model), ``smollm2`` (SmolLM2-135M-Instruct in the workspace's models/,
imported once by ``studio import-gguf`` when absent: bench/throughput.py's real_model) or a model folder;
--completion-length replaces the example's 8 tokens (a real model's answers need more room).

Measured: steps per second over the training steps only: (last step - step W) / (time of the last step's log -
time of step W's log), W warm-up steps skipped, so start-up, data, model loading and the final save are outside
the window while every per-step cost (generation, the reference pass, the update, Studio's callbacks) is inside.
Studio's side reads the timestamps of its ``log`` events, the plain side those its one-line callback writes.

Compared: the per-step mean total reward and each reward's mean (TRL's ``reward`` and ``rewards/<name>/mean``) of
every run, Studio against plain, for the fixed seed; and that Studio's sampled prompts are the plain script's.

Writes bench/results/grpo_throughput.md and .json (--out to change the stem; --no-write to skip; --quick writes only
to an --out given). Light at import; the trainers run in subprocesses.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from throughput import launch_parts, machine, real_model, run  # noqa: E402 - bench/ is not a package

from engine.core import acting  # noqa: E402 - after the repo root is on sys.path
from engine.core.events import read_all  # noqa: E402 - after the repo root is on sys.path
from engine.spec.schema import RunSpec, load_spec  # noqa: E402

EXAMPLE = ROOT / "assets" / "examples" / "grpo_math.yaml"
DIGITS = ROOT / "bench" / "grpo_digits_reward.py"
REWARDS = ("reward", "rewards/math/mean", "rewards/number_only/mean", "rewards/digits/mean")
COMPARED = (*REWARDS, "loss", "kl", "completions/mean_length", "entropy")


def bench_spec(steps: int, model_dir: str | None = None, completion_length: int | None = None) -> RunSpec:
    """The example's job with the bench's steps and the digits reward; another model and completion length when
    given (None: the example's)."""
    data = load_spec(EXAMPLE).model_dump(mode="json")
    data["train"].update(max_steps=steps, logging_steps=1, save_steps=10 * steps + 1000)
    if model_dir:
        data["model"]["name_or_path"] = model_dir
    if completion_length:
        data["method"]["grpo"]["max_completion_length"] = completion_length
    data["method"]["grpo"]["rewards"].append(
        {"kind": "python", "file": str(DIGITS), "function": "digits", "weight": 0.5}
    )
    return RunSpec.model_validate(data)


def steps_per_second(points: list[tuple[int, float]], warmup: int) -> tuple[float, int, float]:
    """(steps/s, steps, seconds) over the steps after ``warmup`` from (step, time of its log) points."""
    points = sorted(points)
    start = next((p for p in points if p[0] >= warmup), None)
    end = points[-1] if points else None
    if start is None or end is None or end[0] <= start[0]:
        raise RuntimeError(f"too few logged steps to measure (have {[p[0] for p in points]}, warm-up {warmup})")
    steps, seconds = end[0] - start[0], end[1] - start[1]
    return steps / seconds, steps, seconds


def outside_step(points: list[tuple[int, float, float | None]], warmup: int) -> float | None:
    """Median seconds per step spent outside TRL's ``training_step`` (its own ``step_time``): the time between two
    step logs less the later step's step_time, after ``warmup``. The optimizer step, the scheduler, logging and every
    callback (Studio's events, health rules and sample completions) fall here; generation, rewards, the reference
    pass and the backward are inside step_time."""
    points = sorted(points)
    gaps = [b[1] - a[1] - b[2] for a, b in zip(points, points[1:]) if a[0] >= warmup and b[2] is not None]
    return statistics.median(gaps) if gaps else None


def run_studio(spec: RunSpec, run_dir: Path, threads: int, warmup: int, timeout: float) -> dict:
    argv, _, env = launch_parts(spec, run_dir, threads)
    run_dir.mkdir(parents=True, exist_ok=True)  # the reward file is named at the shell: the trainer may run it
    acting.write_grant(run_dir, reward_files=[DIGITS])
    run(argv, env, run_dir / "train.log", timeout)
    events = read_all(run_dir / "events.jsonl")
    logs = [e for e in events if e["type"] == "log"]
    started = next(e["payload"] for e in events if e["type"] == "run_started")
    rate = steps_per_second([(e["step"], e["ts"]) for e in logs], warmup)
    figures = [{"loss": e["payload"]["loss"], **(e["payload"].get("metrics") or {})} for e in logs]
    rewards = {e["step"]: {k: f.get(k) for k in COMPARED} for e, f in zip(logs, figures)}
    outside = outside_step([(e["step"], e["ts"], f.get("step_time")) for e, f in zip(logs, figures)], warmup)
    samples = [s for e in events if e["type"] == "completions" for s in e["payload"]["samples"]]
    return {
        "rate": rate,
        "outside_step_s": outside,
        "rewards": rewards,
        "sample_prompts": sorted({s["prompt"] for s in samples}),
        "checkpointing": bool(started.get("gradient_checkpointing")),
        "precision": started.get("precision"),
    }


def run_plain(spec: RunSpec, run_dir: Path, threads: int, warmup: int, timeout: float, studio: dict) -> dict:
    """The plain script with the job's settings; gradient checkpointing and precision as Studio's run resolved them
    (``studio``: that run's result; TRL's own defaults are checkpointing on and bf16, Studio's plan and precision
    auto give off and fp32 for the demo model on a CPU)."""
    from engine.spec.rules import resolve_dataset_dir

    _, launcher, env = launch_parts(spec, run_dir, threads)
    t, lora, g = spec.train, spec.method.lora, spec.method.grpo
    ddir = resolve_dataset_dir(spec)
    info = json.loads((ddir / "dataset_info.json").read_text())
    weights = {r.label: r.weight for r in g.rewards}
    timing = run_dir / "timing.jsonl"
    report = [r for r in spec.output.report_to if r != "none"]
    from engine.models.resolve import model_path

    args = {
        "model": model_path(spec.model.name_or_path),
        "data": ddir / info[spec.data.datasets[0]]["file_name"],
        "output-dir": run_dir / "out",
        "max-steps": t.max_steps,
        "batch-size": t.per_device_batch_size,
        "grad-accum": t.gradient_accumulation,
        "num-generations": g.num_generations,
        "max-completion-length": g.max_completion_length,
        "temperature": g.temperature,
        "top-p": g.top_p,
        "beta": g.beta,
        "loss-type": g.loss_type,
        "epsilon": g.epsilon,
        "scale-rewards": g.scale_rewards,
        "math-weight": weights["math"],
        "number-weight": weights["number_only"],
        "digits-weight": weights["digits"],
        "gradient-checkpointing": "on" if studio["checkpointing"] else "off",
        "precision": studio["precision"],
        "lr": t.learning_rate,
        "lr-scheduler": t.lr_scheduler,
        "warmup-steps": t.warmup_steps,
        "weight-decay": t.weight_decay,
        "max-grad-norm": t.max_grad_norm,
        "lora-r": lora.rank,
        "lora-alpha": lora.alpha,
        "lora-dropout": lora.dropout,
        "seed": t.seed,
        "save-steps": t.save_steps,
        "report-to": report[0] if report else "none",
        "timing-file": timing,
    }
    argv = launcher + [str(ROOT / "bench" / "plain_grpo.py")]
    for k, v in args.items():
        argv += [f"--{k}", str(v)]
    if report:
        env["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "out" / "tensorboard")
    run(argv, env, run_dir / "train.log", timeout)
    records = [json.loads(line) for line in timing.read_text().splitlines()]
    logs = [r for r in records if "step" in r]
    prompts = next(r["prompts"] for r in records if r.get("event") == "data_ready")
    return {
        "rate": steps_per_second([(r["step"], r["ts"]) for r in logs], warmup),
        "outside_step_s": outside_step([(r["step"], r["ts"], r.get("step_time")) for r in logs], warmup),
        "rewards": {r["step"]: {k: r.get(k) for k in COMPARED} for r in logs},
        "prompts": prompts,
    }


def reward_gap(a: dict, b: dict, keys: tuple = REWARDS) -> tuple[float | None, int]:
    """(largest |difference| of any of ``keys`` at any step, steps compared); None when one side lacks a figure."""
    worst, steps = 0.0, 0
    for step in sorted(set(a) & set(b)):
        steps += 1
        for k in keys:
            x, y = a[step].get(k), b[step].get(k)
            if x is None or y is None:
                if (x is None) != (y is None):
                    return None, steps
                continue
            worst = max(worst, abs(x - y))
    return (worst if steps else None), steps


def summarize(results: dict, args) -> dict:
    studio, plain = results["studio"], results["plain"]
    sr = [r["rate"][0] for r in studio]
    pr = [r["rate"][0] for r in plain]
    gaps = [reward_gap(s["rewards"], q["rewards"]) for s, q in zip(studio, plain)]
    others = [reward_gap(s["rewards"], q["rewards"], COMPARED[len(REWARDS) :])[0] for s, q in zip(studio, plain)]
    same_runs = [
        reward_gap(studio[0]["rewards"], s["rewards"])[0] for s in studio[1:]
    ]  # Studio against itself: the seed's repeatability on this machine
    prompts = set(plain[0]["prompts"])
    seen = {p for s in studio for p in s["sample_prompts"]}
    return {
        "studio_steps_per_s": sr,
        "plain_steps_per_s": pr,
        "studio_median": statistics.median(sr),
        "plain_median": statistics.median(pr),
        "ratio_of_medians": statistics.median(sr) / statistics.median(pr),
        "median_pair_ratio": statistics.median(s / q for s, q in zip(sr, pr)),
        "studio_outside_step_ms": [_ms(r["outside_step_s"]) for r in studio],
        "plain_outside_step_ms": [_ms(r["outside_step_s"]) for r in plain],
        "reward_max_abs_diff_per_pair": [g[0] for g in gaps],
        "reward_steps_compared": gaps[0][1] if gaps else 0,
        "loss_kl_length_entropy_max_abs_diff_per_pair": others,
        "gradient_checkpointing": studio[0]["checkpointing"],
        "precision": studio[0]["precision"],
        "steps_with_nonzero_reward": sum(1 for v in studio[0]["rewards"].values() if v.get("reward")),
        "studio_vs_studio_reward_max_abs_diff": same_runs,
        "studio_sample_prompts_in_plain_prompts": bool(seen) and seen <= prompts,
        "rewards_by_step": {
            "studio": {str(k): v for k, v in studio[0]["rewards"].items()},
            "plain": {str(k): v for k, v in plain[0]["rewards"].items()},
        },
    }


def markdown(summary: dict, args, argv: list[str], spec: RunSpec, load_at_start: str = "") -> str:
    g, t = spec.method.grpo, spec.train
    model = "the demo model" if args.model == "demo" else Path(spec.model.name_or_path).name
    lines = [
        "# GRPO steps per second: Studio vs a plain TRL GRPOTrainer script (bench/grpo_throughput.py)",
        "",
        f"- date: {datetime.datetime.now().isoformat(timespec='minutes')}",
        f"- machine: {machine()}" + (f"; load average {load_at_start} at the start" if load_at_start else ""),
        f"- job: assets/examples/grpo_math.yaml on {model}, CPU {summary['precision']}, {args.threads} "
        f"thread(s) per process: "
        f"LoRA r{spec.method.lora.rank} all-linear, grpo_arith prompts, group {g.num_generations}, completions "
        f"<= {g.max_completion_length} tokens, {t.per_device_batch_size} completions per step, beta {g.beta}, loss "
        f"{g.loss_type}, lr {t.learning_rate} {t.lr_scheduler}, seed {t.seed}, rewards math (1.0) + number_only "
        f"regex (0.5) + digits (0.5: a python reward file on Studio's side, bench/grpo_digits_reward.py; the plain "
        f"script's own function), gradient checkpointing "
        f"{'on' if summary['gradient_checkpointing'] else 'off'} and {summary['precision']} on both sides (as Studio "
        f"resolved them; TRL's own defaults are checkpointing on and bf16 autocast), "
        f"report_to tensorboard on both sides; {args.steps} steps, {args.warmup} warm-up steps outside "
        f"the window; Studio and plain runs alternate",
        f"- command: `.venv/bin/python bench/grpo_throughput.py {' '.join(argv)}`",
        "",
        "| pair | Studio steps/s | plain steps/s | Studio / plain | Studio ms/step outside training_step "
        "| plain ms/step outside training_step | max abs reward-mean difference | Studio s/step | plain s/step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = zip(
        summary["studio_steps_per_s"],
        summary["plain_steps_per_s"],
        summary["studio_outside_step_ms"],
        summary["plain_outside_step_ms"],
        summary["reward_max_abs_diff_per_pair"],
    )
    for i, (s, q, so, po, gap) in enumerate(rows):
        lines.append(
            f"| {i + 1} | {s:.2f} | {q:.2f} | {s / q:.2f}x | {_num(so, 1)} | {_num(po, 1)} | "
            f"{'n/a' if gap is None else f'{gap:.2e}'} | {1 / s:.2f} | {1 / q:.2f} |"
        )
    med = [_median(summary[f"{side}_outside_step_ms"]) for side in ("studio", "plain")]
    lines += [
        f"| **median** | **{summary['studio_median']:.2f}** | **{summary['plain_median']:.2f}** | | "
        f"**{_num(med[0], 1)}** | **{_num(med[1], 1)}** | | **{1 / summary['studio_median']:.2f}** | "
        f"**{1 / summary['plain_median']:.2f}** |",
        "",
        f"- Studio / plain, ratio of the medians: **{summary['ratio_of_medians']:.2f}x**; median of the per-pair "
        f"ratios {summary['median_pair_ratio']:.2f}x",
        "- ms/step outside training_step: the time between two step logs less TRL's own `step_time` of the later "
        "step (median per run): the optimizer step, logging and every callback, where Studio's events, health rules "
        "and sample completions run. Generation, the rewards, the reference pass and the backward are inside "
        "step_time, the same TRL code on both sides; on this shared 2-core machine step_time itself swings with "
        "the load (see the steps/s column), so this column is the steadier measure of Studio's own overhead",
        f"- rewards: per-step mean total reward and each reward's mean over {summary['reward_steps_compared']} "
        f"steps, Studio against plain (largest absolute difference of any of them in any pair above); Studio "
        f"against its own first run: {_gaps(summary['studio_vs_studio_reward_max_abs_diff'])}",
        f"- Studio's sampled prompts are among the plain script's prompt strings: "
        f"{summary['studio_sample_prompts_in_plain_prompts']}",
        "- TRL's GRPOConfig defaults to bf16=True (autocast, also on a CPU) and gradient_checkpointing=True; the "
        "plain script sets both as Studio resolved them. Left at TRL's defaults, it ran 2-4x slower than Studio in "
        "trial runs on this machine, its loss and KL differing by ~1e-4 (the rewards equal)",
        "",
        f"- loss, KL, mean completion length and entropy, largest absolute difference per pair: "
        f"{_gaps(summary['loss_kl_length_entropy_max_abs_diff_per_pair'])}",
        "",
        "First pair, step by step (Studio / plain):",
        "",
        "| step | reward | math | number_only | digits | loss | kl |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    st, pl = summary["rewards_by_step"]["studio"], summary["rewards_by_step"]["plain"]
    for step in sorted(set(st) & set(pl), key=int):
        cells = []
        for k in (*REWARDS, "loss", "kl"):
            cells.append(f"{_num(st[step].get(k))} / {_num(pl[step].get(k))}")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 2)


def _num(v, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _gaps(values: list) -> str:
    return ", ".join("n/a" if v is None else f"{v:.2e}" for v in values) or "(one run)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/grpo_throughput.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 4 steps, 1 pair, results not written")
    p.add_argument("--repeats", type=int, default=5, help="Studio / plain pairs")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3, help="steps skipped before the measuring window")
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--model", default="demo", help="demo, smollm2 (SmolLM2-135M-Instruct) or a model folder")
    p.add_argument("--completion-length", type=int, default=None, help="max completion tokens (the example's 8)")
    p.add_argument("--out", default=None, help="stem of the .md / .json (default bench/results/grpo_throughput)")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (run logs, events)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per training subprocess")
    args = p.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.repeats, args.steps, args.warmup = 1, 4, 1

    scratch = Path(tempfile.mkdtemp(prefix="studio-grpo-bench-"))
    os.environ.setdefault("STUDIO_HOME", str(scratch / "home"))
    os.environ["STUDIO_FORCE_CPU"] = "1"
    for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(k, "1")
    load_at_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        from engine.trainer import demo

        demo.build_demo()
        model_dir = None if args.model == "demo" else real_model() if args.model == "smollm2" else args.model
        spec = bench_spec(args.steps, model_dir, args.completion_length)
        results: dict = {"studio": [], "plain": []}
        for i in range(args.repeats):
            for side in ("studio", "plain"):
                t0 = time.time()
                where = (spec, scratch / f"{side}-{i + 1}", args.threads, args.warmup, args.timeout)
                r = run_studio(*where) if side == "studio" else run_plain(*where, results["studio"][-1])
                results[side].append(r)
                rate, steps, seconds = r["rate"]
                print(
                    f"[bench] {side} #{i + 1}: {rate:.2f} steps/s ({steps} steps in {seconds:.2f}s; process "
                    f"{time.time() - t0:.1f}s)",
                    flush=True,
                )
        summary = summarize(results, args)
        text = markdown(summary, args, argv, spec, load_at_start)
        print(text)
        if not args.no_write and (args.out or not args.quick):
            stem = Path(args.out or ROOT / "bench" / "results" / "grpo_throughput")
            stem.parent.mkdir(parents=True, exist_ok=True)
            stem.with_suffix(".md").write_text(text)
            record = {"date": datetime.datetime.now().isoformat(timespec="minutes"), "machine": machine()}
            record |= {"command": argv, "steps": args.steps, "warmup": args.warmup, "threads": args.threads}
            stem.with_suffix(".json").write_text(json.dumps(record | summary, indent=1) + "\n")
            print(f"[bench] wrote {stem}.md and {stem}.json")
        return 0
    finally:
        if args.keep:
            print(f"[bench] scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
