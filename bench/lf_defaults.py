"""LLaMA-Factory defaults vs Studio's: `studio train` on an LF-style YAML against a plain Trainer + PEFT script.

Run:  .venv/bin/python bench/lf_defaults.py [--quick] [--repeats 3] [--steps 60] [--models demo,20m]

Three contenders, alternating in one invocation (the order rotates each repeat, so machine load hits all alike):

  (a) lf-yaml   ``studio train lf.yaml``: a YAML that sets only what LLaMA-Factory's README examples set (model,
                stage sft, lora rank 8 target all, dataset / template / cutoff_len / max_samples / overwrite_cache /
                preprocessing_num_workers, output_dir, logging / save steps, batch, lr, max_steps, cosine,
                warmup_ratio, bf16 false). Studio imports it with its own defaults: gradient checkpointing auto
                (off when the memory plan fits), padding-free batches, logits at trained positions only,
                attention per sample inside the padding-free rows (model.packed_attention auto on the CPU).
  (b) plain-lf  bench/plain_lora_sft.py configured with LLaMA-Factory's defaults: gradient checkpointing on
                (reentrant, LF's use_reentrant_gc), padded batches (to a multiple of 8, as LF's sft collator).
  (c) plain-best the same script at its best: no checkpointing, transformers' DataCollatorWithFlattening.

plus, once per model, (a-off): the same run as a Studio spec with both defaults turned off (data.padding_free off,
train.gradient_checkpointing on), to show the default is a per-run choice and what turning it off costs.

The plain script tokenises as the engine does (every assistant turn trained, each prompt / answer segment tokenised
on its own, the same chat template), uses the same seed for the LoRA init and the data order (data_seed), the same
hyper-parameters (read from the imported spec) and the same launcher (the command and
environment a Studio run gets, one thread per process). So (a) and (b) see the same samples at each step: checked
per step by the number of non-pad tokens each side counted, and the loss difference is taken over those steps.

Measured per run:
  tokens/s  non-pad tokens per second over the training steps after the warm-up (the Trainer's
            num_input_tokens_seen with include_num_input_tokens_seen="non_padding" on every side; a flattened batch
            has no attention_mask, so the Trainer counts input_ids != pad id), from the log timestamps
  start-up  from the command's start (``studio train`` / the plain script's) to the data being ready (the engine's
            data_ready event; the script's mark after tokenising) and to the end of the first step (its log). (a)'s
            first run on each model has a cold tokenisation cache (the cache folder is emptied before it), the later
            ones reuse it.

--quick: 1 repeat, 20 steps, both models (a few minutes; results printed, not written). Writes
bench/results/lf_defaults.md (--out; --no-write to skip). Light at import; every trainer runs in a subprocess.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import throughput  # noqa: E402 - bench/throughput.py: model building, launcher, rate, machine description

from engine.core.events import read_all  # noqa: E402
from engine.lf.compat import load_any  # noqa: E402
from engine.spec.schema import RunSpec, save_spec  # noqa: E402

TARGET_B, TARGET_C, LOSS_TOL = 1.4, 1.0, 1e-3
MODELS = {"demo": (None, None), "20m": (512, 7)}  # (hidden, layers) of a Llama built from config; None: the demo's
SIDES = ("a", "b", "c")
NAMES = {
    "a": "(a) studio train lf.yaml",
    "b": "(b) plain, LF defaults",
    "c": "(c) plain, best",
    "a-off": "(a-off) studio, defaults off",
}


def lf_yaml(path: Path, model_dir: str, data_dir: Path, output_dir: Path, steps: int) -> Path:
    """What LLaMA-Factory's README examples set (examples/train_lora/llama3_lora_sft.yaml), on the demo data."""
    path.write_text(
        f"""### model
model_name_or_path: {model_dir}

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all

### dataset
dataset: demo_alpaca
dataset_dir: {data_dir}
template: chatml
cutoff_len: 256
max_samples: 1000
overwrite_cache: true
preprocessing_num_workers: 16

### output
output_dir: {output_dir}
logging_steps: 1
save_steps: 100000
report_to: none

### train
per_device_train_batch_size: 8
gradient_accumulation_steps: 1
learning_rate: 1.0e-4
max_steps: {steps}
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: false
"""
    )
    return path


def studio_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def run_studio(spec_file: Path, log: Path, timeout: float) -> dict:
    """`studio train SPEC` as a user runs it; the run's folder is read back from its first line."""
    t0 = time.time()
    with open(log, "wb") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli", "train", str(spec_file)],
            env=studio_env(),
            cwd=str(ROOT),
            stdout=fh,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    text = log.read_text(errors="replace")
    found = re.search(r"^run \S+: \w+ in (\S+)$", text, re.M)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"studio train {spec_file} exited {proc.returncode}; log {log}:\n{text[-3000:]}")
    run_dir = Path(found.group(1))
    events = read_all(run_dir / "events.jsonl")
    steps = [
        (e["step"], e["ts"], e["payload"]["tokens_seen"], e["payload"]["loss"]) for e in events if e["type"] == "log"
    ]
    data = next(e for e in events if e["type"] == "data_ready")
    started = next(e for e in events if e["type"] == "run_started")["payload"]
    return {
        "t0": t0,
        "data_ready": data["ts"],
        "steps": steps,
        "checkpointing": started.get("gradient_checkpointing"),
        "padding_free": data["payload"].get("padding_free"),
        "attention": "per sample"
        if started.get("per_sample_attention")
        else ("block-diagonal mask" if data["payload"].get("padding_free") else "padding mask"),
        "run_dir": str(run_dir),
    }


def run_plain(spec: RunSpec, mode: str, run_dir: Path, timeout: float) -> dict:
    """bench/plain_lora_sft.py with the spec's hyper-parameters; mode b (LF defaults) or c (at its best)."""
    from engine.spec.rules import resolve_dataset_dir

    _, launcher, env = throughput.launch_parts(spec, run_dir, 1)
    t, lora, d = spec.train, spec.method.lora, spec.data
    info = json.loads((resolve_dataset_dir(spec) / "dataset_info.json").read_text())
    timing = run_dir / "timing.jsonl"
    flags = {
        "--model": spec.model.name_or_path,
        "--data": str(resolve_dataset_dir(spec) / info[d.datasets[0]]["file_name"]),
        "--output-dir": str(run_dir / "out"),
        "--max-samples": d.max_samples or 0,
        "--cutoff-len": d.cutoff_len,
        "--max-steps": t.max_steps,
        "--batch-size": t.per_device_batch_size,
        "--grad-accum": t.gradient_accumulation,
        "--lr": t.learning_rate,
        "--lr-scheduler": t.lr_scheduler,
        "--warmup-steps": t.warmup_steps,
        "--warmup-ratio": t.warmup_ratio,
        "--weight-decay": t.weight_decay,
        "--max-grad-norm": t.max_grad_norm,
        "--lora-r": lora.rank,
        "--lora-alpha": lora.alpha,
        "--lora-dropout": lora.dropout,
        "--seed": t.seed,
        "--data-seed": t.seed,
        "--logging-steps": t.logging_steps,
        "--save-steps": t.save_steps,
        "--report-to": "none",
        "--timing-file": str(timing),
    }
    if mode == "b":
        flags |= {"--collator": "pad", "--pad-to-multiple-of": 8}
    else:
        flags |= {"--collator": "flatten"}
    argv = launcher + [str(ROOT / "bench" / "plain_lora_sft.py")]
    for k, v in flags.items():
        argv += [k, str(v)]
    argv += ["--train-all-turns", "--no-cache"] + (["--gradient-checkpointing"] if mode == "b" else [])
    t0 = time.time()
    throughput.run(argv, env, run_dir / "train.log", timeout)
    records = [json.loads(line) for line in timing.read_text().splitlines()]
    return {
        "t0": t0,
        "data_ready": next(r["ts"] for r in records if r.get("event") == "data_ready"),
        "steps": [(r["step"], r["ts"], r["tokens_seen"], r["loss"]) for r in records if "step" in r],
        "checkpointing": mode == "b",
        "padding_free": mode == "c",
        "attention": "block-diagonal mask" if mode == "c" else "padding mask",
        "run_dir": str(run_dir),
    }


def summarise(r: dict, warmup: int) -> dict:
    steps = sorted(r["steps"])
    tps, tokens, seconds = throughput.rate([(s, ts, n) for s, ts, n, _ in steps], warmup)
    first = steps[0][1]
    per_step, prev = {}, 0
    for s, _, n, loss in steps:
        per_step[s] = (n - prev, loss)
        prev = n
    return r | {
        "tps": tps,
        "tokens": tokens,
        "seconds": seconds,
        "to_data": r["data_ready"] - r["t0"],
        "data_to_step1": first - r["data_ready"],
        "to_step1": first - r["t0"],
        "per_step": per_step,
    }


def loss_diff(x: dict, y: dict) -> tuple[float, int, int]:
    """(max |loss difference|, steps compared, steps) over the steps where both sides counted the same tokens."""
    same = [s for s in x["per_step"] if s in y["per_step"] and x["per_step"][s][0] == y["per_step"][s][0]]
    diff = max((abs(x["per_step"][s][1] - y["per_step"][s][1]) for s in same), default=float("nan"))
    return diff, len(same), len(x["per_step"])


def bench_model(label: str, model_dir: str, params: int, args, scratch: Path) -> tuple[str, dict]:
    from engine.core import workspace

    home = workspace.home()
    work = scratch / label
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict]] = {s: [] for s in SIDES}
    spec = None
    cache = home / "cache" / "tokenized"
    shutil.rmtree(cache, ignore_errors=True)  # (a)'s first run on this model tokenises from scratch
    for i in range(args.repeats):
        order = SIDES[i % 3 :] + SIDES[: i % 3]
        for side in order:
            run_dir = work / f"{side}-{i + 1}"
            run_dir.mkdir(parents=True, exist_ok=True)
            yaml_file = lf_yaml(
                run_dir / "lf.yaml", model_dir, home / "data", home / "saves" / f"{label}-{side}-{i + 1}", args.steps
            )
            if spec is None:
                spec = load_any(yaml_file)
            if side == "a":
                cold = not any(cache.glob("*.arrow")) if cache.exists() else True
                r = run_studio(yaml_file, run_dir / "studio.log", args.timeout) | {"cold": cold}
            else:
                r = run_plain(spec, side, run_dir, args.timeout)
            r = summarise(r, args.warmup)
            results[side].append(r)
            print(
                f"[bench] {label} {NAMES[side]} #{i + 1}: {r['tps']:,.0f} tok/s; data ready {r['to_data']:.1f}s, "
                f"first step {r['to_step1']:.1f}s after start; checkpointing {r['checkpointing']}, padding-free "
                f"{r['padding_free']}",
                flush=True,
            )
    if args.off_check:
        run_dir = work / "a-off"
        run_dir.mkdir(parents=True, exist_ok=True)
        off = load_any(
            lf_yaml(run_dir / "lf.yaml", model_dir, home / "data", home / "saves" / f"{label}-a-off", args.steps)
        )
        off.data.padding_free = "off"
        off.train.gradient_checkpointing = "on"
        save_spec(off, run_dir / "spec.yaml")
        r = summarise(
            run_studio(run_dir / "spec.yaml", run_dir / "studio.log", args.timeout) | {"cold": False}, args.warmup
        )
        results["a-off"] = [r]
        print(
            f"[bench] {label} {NAMES['a-off']}: {r['tps']:,.0f} tok/s; checkpointing {r['checkpointing']}, "
            f"padding-free {r['padding_free']}",
            flush=True,
        )
    return report(label, params, results, args), results


def report(label: str, params: int, results: dict, args) -> str:
    med = {s: statistics.median(r["tps"] for r in rs) for s, rs in results.items()}
    ab, ac = med["a"] / med["b"], med["a"] / med["c"]
    pair_ab = statistics.median(a["tps"] / b["tps"] for a, b in zip(results["a"], results["b"]))
    pair_ac = statistics.median(a["tps"] / c["tps"] for a, c in zip(results["a"], results["c"]))
    diffs = [loss_diff(a, b) for a, b in zip(results["a"], results["b"])]
    diffs_c = [loss_diff(a, c) for a, c in zip(results["a"], results["c"])]
    worst = max(d[0] for d in diffs)
    lines = [
        f"## model: {label} (~{params / 1e6:.1f}M params)",
        "",
        "| contender | run | tok/s | tokens / s window | to data ready s | data ready to step 1 s | to step 1 s | "
        "checkpointing | padding-free | attention |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for side, rs in results.items():
        for i, r in enumerate(rs):
            note = " (cold cache)" if r.get("cold") else ""
            lines.append(
                f"| {NAMES[side]} | {i + 1}{note} | {r['tps']:,.0f} | {r['tokens']:,} / {r['seconds']:.2f} | "
                f"{r['to_data']:.1f} | {r['data_to_step1']:.1f} | {r['to_step1']:.1f} | {r['checkpointing']} | "
                f"{r['padding_free']} | {r['attention']} |"
            )
    ok = lambda v, target: "met" if v >= target else "MISSED"  # noqa: E731
    med_start = {s: statistics.median(r["to_step1"] for r in rs) for s, rs in results.items()}
    med_data = {s: statistics.median(r["to_data"] for r in rs) for s, rs in results.items()}
    warm_a = [r for r in results["a"] if not r.get("cold")]
    lines += [
        "",
        "| median tok/s | " + " | ".join(NAMES[s] for s in results) + " |",
        "|---|" + "---:|" * len(results),
        "| | " + " | ".join(f"**{med[s]:,.0f}**" for s in results) + " |",
        "",
        f"- (a) / (b): **{ab:.2f}x** (target >= {TARGET_B}x: {ok(ab, TARGET_B)}); median of the per-repeat ratios "
        f"{pair_ab:.2f}x",
        f"- (a) / (c): **{ac:.2f}x** (target >= {TARGET_C}x: {ok(ac, TARGET_C)}); median of the per-repeat ratios "
        f"{pair_ac:.2f}x",
        f"- loss, (a) vs (b): max |difference| per step **{worst:.2e}** over "
        + ", ".join(f"{n}/{total}" for _, n, total in diffs)
        + f" steps with the same samples (the same non-pad token count) per repeat (target <= {LOSS_TOL:g}: "
        + ("met" if worst <= LOSS_TOL and all(n == total for _, n, total in diffs) else "MISSED")
        + f"); (a) vs (c): {max(d[0] for d in diffs_c):.2e}",
        f"- start-up, median seconds from the command's start to the end of step 1: (a) {med_start['a']:.1f}, "
        f"(b) {med_start['b']:.1f}, (c) {med_start['c']:.1f}; to data ready: (a) {med_data['a']:.1f}"
        + (
            f" (cold cache {results['a'][0]['to_data']:.1f}, warm median "
            f"{statistics.median(r['to_data'] for r in warm_a):.1f})"
            if warm_a and results["a"][0].get("cold")
            else ""
        )
        + f", (b) {med_data['b']:.1f}, (c) {med_data['c']:.1f}",
    ]
    if "a-off" in results:
        off = results["a-off"][0]
        d_off = loss_diff(off, results["b"][0])
        lines.append(
            f"- defaults off per run (a-off: data.padding_free off, train.gradient_checkpointing on): checkpointing "
            f"{off['checkpointing']}, padding-free {off['padding_free']}, {off['tps']:,.0f} tok/s "
            f"({off['tps'] / med['b']:.2f}x (b)); loss vs (b) {d_off[0]:.2e} over {d_off[1]}/{d_off[2]} steps"
        )
    return "\n".join(lines) + "\n"


def verdict(results: dict) -> bool:
    med = {s: statistics.median(r["tps"] for r in rs) for s, rs in results.items()}
    diffs = [loss_diff(a, b) for a, b in zip(results["a"], results["b"])]
    return (
        med["a"] / med["b"] >= TARGET_B
        and med["a"] / med["c"] >= TARGET_C
        and all(d <= LOSS_TOL and n == total for d, n, total in diffs)
    )


def header(args, argv: list[str] | None, started: float) -> str:
    command = " ".join(argv if argv is not None else sys.argv[1:])
    return (
        "# LLaMA-Factory defaults vs Studio's (bench/lf_defaults.py)\n\n"
        f"- date: {datetime.datetime.now().isoformat(timespec='minutes')}; "
        f"{(time.time() - started) / 60:.0f} minutes\n"
        f"- machine: {throughput.machine()}\n"
        f"- command: `.venv/bin/python bench/lf_defaults.py {command}`\n"
        f"- job: LoRA all-linear r=8 (alpha 16), fp32 on CPU, one thread per process, batch 8, {args.steps} "
        f"steps, lr 1e-4 cosine, warmup_ratio 0.1, seed 42, demo_alpaca (360 rows, chatml, cutoff 256); tok/s "
        f"over the steps after {args.warmup} warm-up steps\n"
        "- contenders: (a) `studio train` on the LF-style YAML (Studio's defaults: checkpointing auto, "
        "padding-free, logits at trained positions only, per-sample attention in padding-free rows); (b) "
        "bench/plain_lora_sft.py with LF's defaults "
        "(gradient checkpointing on, reentrant; "
        "padded to a multiple of 8); (c) the same script at its best (no checkpointing, "
        "DataCollatorWithFlattening); alternating, the order rotating each repeat\n"
        f"- targets: (a) >= {TARGET_B}x (b) and >= {TARGET_C}x (c) in median tok/s; (a)'s loss per step equal to "
        f"(b)'s within {LOSS_TOL:g} on every step (same samples: the same non-pad token count per step)\n\n"
    )


def write(out: Path, text: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"[bench] wrote {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/lf_defaults.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 repeat, 20 steps, no a-off run; results not written")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5, help="steps skipped before the measuring window")
    p.add_argument("--models", default="demo,20m", help="demo, 20m (a ~20M-parameter Llama built from config)")
    p.add_argument("--no-off-check", dest="off_check", action="store_false", help="skip the a-off run")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "lf_defaults.md"))
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (run folders, logs)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per training subprocess")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.steps, args.warmup, args.off_check = 1, 20, 3, False

    scratch = Path(tempfile.mkdtemp(prefix="studio-bench-lf-"))
    os.environ["STUDIO_HOME"] = str(scratch / "home")
    os.environ["STUDIO_FORCE_CPU"] = "1"
    for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(k, "1")
    started = time.time()
    try:
        sections, ok = [], True
        for label in [m.strip() for m in args.models.split(",") if m.strip()]:
            hidden, layers = MODELS[label]
            model_dir, params = throughput.prepare_model(scratch, hidden, layers)
            section, results = bench_model(label, model_dir, params, args, scratch)
            print(section, flush=True)
            sections.append(section)
            ok = ok and verdict(results)
            if not args.quick and not args.no_write:
                write(Path(args.out), header(args, argv, started) + "\n".join(sections))
        print(f"[bench] done when: {'holds' if ok else 'does NOT hold'} ({(time.time() - started) / 60:.1f} min)")
        return 0 if ok or args.quick else 1
    finally:
        if args.keep:
            print(f"[bench] scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
