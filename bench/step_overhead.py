"""What a training step costs beyond its arithmetic, on the CPU: operators per decoder layer, forced host-device
synchronisations, and the Python time outside operators, for Studio's training path and a plain transformers + peft
loop, in one run.

Run:  .venv/bin/python bench/step_overhead.py [--layers 16 --hidden 64 --rank 16] [--steps 12 --logging-steps 4]
      [--before REV] [--out bench/results/step_overhead.md]

A many-layer tiny Llama (built in code with the demo's tokenizer: 16 layers of hidden 64 by default) makes the
per-layer overhead the step's whole cost, as it is on a GPU whose kernels finish faster than Python launches them
(bench/results/gpu_efficiency.md). LoRA of rank 16 on every linear layer, packed rows. Each configuration runs in
its own subprocess, twice:

- counted: a TorchDispatchMode counts every aten operator per optimizer step, and those a decoder layer runs in its
  forward (between the layer's forward hooks) and in its backward (the autograd node running, tagged with its layer
  when the forward built it); torch.Tensor's item / tolist / cpu / numpy / __bool__ / __int__ / __float__ are
  wrapped to count what on a GPU would each wait for the device, each attributed to its caller (the first frame
  outside torch). Calls inside the data loader's fetch are not counted: its tensors are still on the host there.
- timed: torch.profiler over the training loop; the operators' time is the sum of the top-level aten operators
  (none of their ancestors an aten operator), the rest of the step's wall time is Python and framework overhead.

Configurations: ``studio`` (engine.trainer.train.train on a spec, in process, with Studio's callbacks, collators,
attention choice and LoRA through peft), ``studio before`` (the same from ``--before REV``'s engine/, unpacked from
git into a temporary folder: today's code measured in the same run as the changed one) and ``plain``
(bench/plain_lora_sft.py: transformers' Trainer, peft's LoRA, DataCollatorWithFlattening, logging every
``--logging-steps``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ---- the parent: the tiny model, the configurations, the table ----


def build_model(home: Path, layers: int, hidden: int) -> tuple[str, str]:
    """The demo workspace (tokenizer, demo_alpaca) and a Llama of ``layers`` x ``hidden`` with the demo tokenizer."""
    os.environ["STUDIO_HOME"] = str(home)
    sys.path.insert(0, str(ROOT))
    from engine.trainer import demo

    paths = demo.build_demo()
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(paths["model_dir"])
    import torch

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 32),
        num_key_value_heads=max(1, hidden // 64),
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    target = home / "models" / f"tiny-{layers}x{hidden}"
    LlamaForCausalLM(config).save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    data = Path(paths["data_dir"]) / "demo_alpaca.json"
    return str(target), str(data)


def unpack(rev: str, into: Path) -> Path:
    """``rev``'s engine/ in a folder of its own."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "engine"], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def child(config: str, mode: str, root: Path, model: str, data: str, work: Path, a: argparse.Namespace) -> dict:
    argv = [sys.executable, __file__, "--child", config, "--mode", mode, "--root", str(root)]
    argv += ["--model", model, "--data", data, "--work", str(work), "--steps", str(a.steps)]
    argv += ["--logging-steps", str(a.logging_steps), "--rank", str(a.rank), "--layers", str(a.layers)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    env.update(TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", GRADIO_ANALYTICS_ENABLED="False")
    t0 = time.time()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=str(root))
    if proc.returncode != 0:
        raise SystemExit(f"{config} {mode} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    line = [x for x in proc.stdout.splitlines() if x.startswith("STEP_OVERHEAD ")][-1]
    out = json.loads(line[len("STEP_OVERHEAD ") :])
    out["seconds"] = round(time.time() - t0, 1)
    print(f"  {config} {mode}: {out['seconds']} s", flush=True)
    return out


def table(results: dict[str, dict], args: argparse.Namespace, load: str) -> str:
    configs = list(results)
    rows = [
        ("per-sample attention (Studio's choice on the CPU)", "per_sample_attention"),
        ("logits only at trained positions", "trained_logits_only"),
        ("aten operators per optimizer step", "ops_per_step"),
        ("operators per decoder layer, forward", "ops_per_layer_fwd"),
        ("operators per decoder layer, backward", "ops_per_layer_bwd"),
        ("operators per decoder layer, forward + backward", "ops_per_layer"),
        ("of which not views (launch a kernel on a GPU)", "launch_ops_per_layer"),
        ("not-view operators per optimizer step", "launch_ops_per_step"),
        ("forced syncs per unlogged step", "syncs_per_unlogged_step"),
        ("forced syncs per logged step", "syncs_per_logged_step"),
        ("wall ms per step, median of the unprofiled steps", "median_step_ms"),
        ("wall ms per profiled step", "wall_per_step_ms"),
        ("of which in aten operators, ms", "op_per_step_ms"),
        ("outside operators (Python, framework, profiler), ms", "outside_ms"),
    ]
    lines = [
        "| | " + " | ".join(configs) + " |",
        "|---|" + "---|" * len(configs),
    ]
    for label, key in rows:
        cells = []
        for c in configs:
            v = results[c].get(key, "")
            cells.append("" if v is None else (("yes" if v else "no") if isinstance(v, bool) else str(v)))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    notes = []
    for c in configs:
        r = results[c]
        for where, key in (("unlogged", "sync_callers_unlogged"), ("logged", "sync_callers_logged")):
            steps = r[f"{where}_steps"]
            callers = ", ".join(f"`{name}` x{n / steps:.3g}" for name, n in r[key]) or "none"
            notes.append(f"- {c}, per {where} step: {callers}")
    top = ", ".join(f"{k} {v}" for k, v in list(results[configs[0]]["layer_op_names"].items())[:24])
    head = (
        f"# Step overhead on the CPU\n\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"bench/step_overhead.py --layers {args.layers} --hidden {args.hidden} --rank {args.rank} --steps "
        f"{args.steps} --logging-steps {args.logging_steps}"
        + (f" --before {args.before}" if args.before else "")
        + f"; one thread per process; load average at the start {load} on {os.cpu_count()} cores "
        "(other engineers' benches share the machine: the times are noisy, the counts are not).\n\n"
        "A Llama of the demo's tokenizer, LoRA r16 on every linear layer, fp32, packed rows of 256 (Studio) or "
        "padding-free rows (plain: DataCollatorWithFlattening); one forward + backward per optimizer step. "
        "A forced sync is a call of item / tolist / cpu / numpy / bool / int / float on a tensor outside the data "
        "loader, or an operator whose output size depends on the values (nonzero, masked_select, indexing by a "
        "boolean mask): on a GPU each waits for every kernel queued before it. A view (view, t, transpose, slice, "
        "detach, ...) launches no kernel on a GPU; the other operators each launch at least one.\n\n"
    )
    return (
        head
        + "\n".join(lines)
        + "\n\nWhere the syncs come from (calls per step):\n"
        + "\n".join(notes)
        + (f"\n\nOperators of one decoder layer per pass ({configs[0]}): {top}\n")
    )


def layer_table(layers: dict[str, dict], args: argparse.Namespace) -> str:
    """The LoRA decoder layer alone, eager and under torch.compile (bench/step_probe.py run_layers)."""
    lines = [
        "| decoder layer, LoRA r16, mask path | aten operators (not views) | compiled kernels | launches per layer "
        "and pass | step ms | first step s |",
        "|---|---|---|---|---|---|",
    ]
    for mode, r in layers.items():
        lines.append(
            f"| {mode} | {r['aten_per_layer']} | {r['kernels_per_layer']} | {r['launches_per_layer']} | "
            f"{r['step_ms']} | {r['first_step_s']} |"
        )
    return (
        f"\nThe decoder layer alone ({args.layers} and {args.layers // 2} layers, per layer from the difference; "
        "two rows of 256 tokens, transformers' block-diagonal mask; torch.profiler, top-level operators; "
        "first step s: the first model's first step, which under compile includes compiling the layer, "
        "reused by the others):\n\n" + "\n".join(lines) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--logging-steps", type=int, default=4)
    p.add_argument("--before", default="", help="a git revision whose engine/ is measured beside today's")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "step_overhead.md"))
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="counted", help=argparse.SUPPRESS)
    p.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    p.add_argument("--model", default="", help=argparse.SUPPRESS)
    p.add_argument("--data", default="", help=argparse.SUPPRESS)
    p.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        sys.path.insert(0, str(ROOT / "bench"))
        import step_probe

        args.config = args.child
        print("STEP_OVERHEAD " + json.dumps(step_probe.run_child(args)), flush=True)
        return 0

    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="step-overhead-") as tmp:
        tmp = Path(tmp)
        model, data = build_model(tmp / "home", args.layers, args.hidden)
        configs = {"plain": ROOT}
        if args.before:
            configs["studio before"] = unpack(args.before, tmp / "before")
        configs["studio"] = ROOT
        configs["studio, mask"] = ROOT  # model.packed_attention: mask, Studio's choice on GPUs
        results: dict[str, dict] = {}
        for name, root in configs.items():
            counted = child(name, "counted", root, model, data, tmp / "work" / f"{len(results)}c", args)
            timed = child(name, "timed", root, model, data, tmp / "work" / f"{len(results)}t", args)
            r = {**counted, **{k: timed[k] for k in ("median_step_ms", "wall_per_step_ms", "op_per_step_ms")}}
            r["ops_per_layer"] = round(r["ops_per_layer_fwd"] + r["ops_per_layer_bwd"], 2)
            r["syncs_per_unlogged_step"] = round(r["syncs_unlogged_steps"] / max(1, r["unlogged_steps"]), 2)
            r["syncs_per_logged_step"] = round(r["syncs_logged_steps"] / max(1, r["logged_steps"]), 2)
            r["outside_ms"] = round(r["wall_per_step_ms"] - r["op_per_step_ms"], 2)
            results[name] = r
        layers = {m: child("layers", m, ROOT, model, data, tmp / "work" / m, args) for m in ("eager", "compile")}
    text = table(results, args, load) + layer_table(layers, args)
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
