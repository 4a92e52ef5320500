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
import collections
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYNC_METHODS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")
TAG = "studio_bench_layer"
PROFILED = 2  # steps the timed run profiles
# operators that on a GPU wait for the device: their output's size depends on the values
SYNCING_OPS = ("aten.nonzero", "aten.masked_select", "aten._unique2", "aten.repeat_interleave.Tensor")
# operators that only make a new view of a tensor: no kernel on a GPU
VIEW_OPS = {
    "view",
    "_unsafe_view",
    "t",
    "transpose",
    "unsqueeze",
    "squeeze",
    "slice",
    "select",
    "detach",
    "expand",
    "alias",
    "as_strided",
    "permute",
    "reshape",
    "split",
    "chunk",
    "unbind",
    "narrow",
    "view_as",
    "lift_fresh",
}


# ---- the child: one configuration, counted or timed ----


class Probe:
    """The counters of one child run; installed before the Trainer is built, read after training."""

    def __init__(self, root: Path, logging_steps: int):
        self.root, self.logging_steps = root, logging_steps
        self.on = False
        self.in_data = False
        self.busy = False
        self.step = 0
        self.layer: int | None = None
        self.layers = 0
        self.micro_steps = 0
        self.ops = collections.Counter()  # step -> operators
        self.layer_ops = collections.Counter()  # "fwd" / "bwd" -> operators inside decoder layers
        self.layer_names = collections.Counter()  # operator name -> count, inside decoder layers
        self.syncs: list[tuple[int, str, str]] = []  # (step, method, caller)
        self.step_wall: dict[int, float] = {}
        self._t: float = 0.0
        self.profiler = None
        self.tokens = collections.Counter()

    def caller(self) -> str:
        frame = sys._getframe(2)
        here = str(Path(__file__).resolve())
        while frame is not None:
            name = frame.f_code.co_filename
            if f"{os.sep}torch{os.sep}" not in name and name != here:
                break
            frame = frame.f_back
        if frame is None:
            return "?"
        name = frame.f_code.co_filename
        if "site-packages" + os.sep in name:
            name = name.split("site-packages" + os.sep, 1)[1]
        elif name.startswith(str(self.root)):
            name = os.path.relpath(name, self.root)
        return f"{name}:{frame.f_lineno} {frame.f_code.co_name}"

    def patch_syncs(self) -> None:
        import torch

        for method in SYNC_METHODS:
            original = getattr(torch.Tensor, method)

            def wrapper(tensor, *args, _original=original, _method=method, **kwargs):
                if self.on and not self.in_data and not self.busy:
                    self.busy = True
                    try:
                        where = self.caller()
                        # the sampler's own host tensors (accelerate's seedable sampler), not a device's
                        if not where.startswith("accelerate/data_loader.py"):
                            self.syncs.append((self.step, _method, where))
                    finally:
                        self.busy = False
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, method, wrapper)

    def patch_data(self) -> None:
        from torch.utils.data._utils import fetch

        for cls in (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher):
            original = cls.fetch

            def fetch_(fetcher, *args, _original=original, **kwargs):
                self.in_data = True
                try:
                    return _original(fetcher, *args, **kwargs)
                finally:
                    self.in_data = False

            cls.fetch = fetch_

    def hook_layers(self, model) -> None:
        layers = [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]
        self.layers = len(layers)

        def tag(tensor, value) -> None:
            stack = [getattr(tensor, "grad_fn", None)]
            while stack:
                node = stack.pop()
                if node is None or TAG in node.metadata:
                    continue
                node.metadata[TAG] = value
                stack.extend(n for n, _ in node.next_functions)

        for i, layer in enumerate(layers):

            def pre(module, args, kwargs, i=i):
                hidden = args[0] if args else kwargs.get("hidden_states")
                if i == 0 and hidden is not None:
                    tag(hidden, -1)  # what came before the first layer is outside every layer
                self.layer = i
                if i == 0:
                    self.micro_steps += 1

            def post(module, args, kwargs, output, i=i):
                self.layer = None
                out = output[0] if isinstance(output, tuple) else output
                tag(out, i)

            layer.register_forward_pre_hook(pre, with_kwargs=True)
            layer.register_forward_hook(post, with_kwargs=True)

    def count_tokens(self, trainer):
        """A forward pre-hook: the tokens each training forward was fed, all and other than the pad token (what the
        Trainer's count must come to)."""
        pad = getattr(trainer.processing_class, "pad_token_id", None)

        def hook(module, args, kwargs):
            ids = kwargs.get("input_ids")
            if self.on and ids is not None and module.training:
                self.busy = True
                try:
                    self.tokens["all"] += ids.numel()
                    self.tokens["non_padding"] += int((ids != pad).sum()) if pad is not None else ids.numel()
                finally:
                    self.busy = False

        return hook

    def dispatch_mode(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        probe = self

        class Count(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if probe.on and not probe.in_data and not probe.busy:
                    probe.ops[probe.step] += 1
                    name = str(func)
                    view = name.split(".")[1] in VIEW_OPS
                    probe.ops[(probe.step, "launch")] += not view
                    node = torch._C._current_autograd_node()
                    if node is not None:
                        layer = node.metadata.get(TAG, -1)
                        phase = "bwd"
                    else:
                        layer, phase = probe.layer, "fwd"
                    if layer is not None and layer >= 0:
                        probe.layer_ops[phase] += 1
                        probe.layer_ops[phase + " launch"] += not view
                        probe.layer_names[f"{phase} {func}"] += 1
                    masked = name.startswith(("aten.index.", "aten.index_put")) and any(
                        isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in (args[1] or ())
                    )
                    if name.startswith(SYNCING_OPS) or masked:
                        probe.syncs.append((probe.step, name + (" (bool mask)" if masked else ""), probe.caller()))
                return func(*args, **(kwargs or {}))

        return Count()

    def callback(self, timed: bool):
        from transformers import TrainerCallback

        probe = self

        class Marks(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kwargs):
                probe.on = True

            def on_step_begin(self, args, state, control, **kwargs):
                probe.step = state.global_step + 1
                probe._t = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                probe.step_wall[state.global_step] = time.perf_counter() - probe._t
                if probe.profiler is not None:
                    probe.profiler.step()

            def on_train_end(self, args, state, control, **kwargs):
                probe.on = False

        return Marks()


def run_child(args: argparse.Namespace) -> dict:
    import torch
    import transformers

    torch.set_num_threads(1)
    root = Path(args.root)
    probe = Probe(root, args.logging_steps)
    timed = args.mode == "timed"
    if not timed:
        probe.patch_syncs()
        probe.patch_data()
    original_init = transformers.Trainer.__init__
    holder: dict = {}

    def init(trainer, *a, **k):
        original_init(trainer, *a, **k)
        if not timed:
            probe.hook_layers(trainer.model)
            trainer.model.register_forward_pre_hook(probe.count_tokens(trainer), with_kwargs=True)
        trainer.add_callback(probe.callback(timed))
        holder["trainer"] = trainer

    transformers.Trainer.__init__ = init
    original_train = transformers.Trainer.train

    def train(trainer, *a, **k):
        if timed:
            from torch.profiler import ProfilerActivity, profile, schedule

            # steps 1-3 unprofiled (the first steps warm up), then PROFILED steps
            with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=2, warmup=1, active=PROFILED)) as p:
                probe.profiler = p
                result = original_train(trainer, *a, **k)
            holder["op_seconds"] = sum(
                e.self_cpu_time_total / 1e6 for e in p.key_averages() if e.key.startswith("aten::")
            )
            holder["wall"] = sum(probe.step_wall[s] for s in range(4, 4 + PROFILED))
            return result
        with probe.dispatch_mode():
            return original_train(trainer, *a, **k)

    transformers.Trainer.train = train
    work = Path(args.work)
    if args.config == "plain":
        sys.path.insert(0, str(ROOT / "bench"))
        import plain_lora_sft

        sys.argv = [
            "plain_lora_sft.py",
            *("--model", args.model, "--data", args.data, "--output-dir", str(work / "plain")),
            *("--max-steps", str(args.steps), "--batch-size", "4", "--lora-r", str(args.rank)),
            *("--lora-alpha", str(2 * args.rank), "--logging-steps", str(args.logging_steps)),
            *("--collator", "flatten", "--no-cache", "--save-steps", "100000", "--train-all-turns"),
        ]
        plain_lora_sft.main()
        extra: dict = {}
    else:
        extra = run_studio(args, work)
    trainer = holder["trainer"]
    steps = trainer.state.global_step
    out = {"config": args.config, "mode": args.mode, "steps": steps, **extra}
    out["tokens_seen"] = trainer.state.num_input_tokens_seen
    out["tokens_fed"] = dict(probe.tokens)
    if timed:
        out["wall_per_step_ms"] = round(holder["wall"] / PROFILED * 1000, 2)
        out["op_per_step_ms"] = round(holder["op_seconds"] / PROFILED * 1000, 2)
        return out
    logged = {s for s in range(1, steps + 1) if s % args.logging_steps == 0}
    unlogged = [s for s in range(1, steps + 1) if s not in logged]
    per_layer_pass = probe.layers * probe.micro_steps
    out.update(
        layers=probe.layers,
        micro_steps=probe.micro_steps,
        ops_per_step=round(sum(probe.ops[s] for s in range(1, steps + 1)) / steps, 1),
        launch_ops_per_step=round(sum(probe.ops[(s, "launch")] for s in range(1, steps + 1)) / steps, 1),
        ops_per_layer_fwd=round(probe.layer_ops["fwd"] / per_layer_pass, 2),
        ops_per_layer_bwd=round(probe.layer_ops["bwd"] / per_layer_pass, 2),
        launch_ops_per_layer=round(
            (probe.layer_ops["fwd launch"] + probe.layer_ops["bwd launch"]) / per_layer_pass, 2
        ),
        layer_op_names={k: round(v / per_layer_pass, 2) for k, v in probe.layer_names.most_common()},
        syncs_unlogged_steps=sum(1 for s, _, _ in probe.syncs if s in unlogged),
        unlogged_steps=len(unlogged),
        syncs_logged_steps=sum(1 for s, _, _ in probe.syncs if s in logged),
        logged_steps=len(logged),
        sync_callers_unlogged=collections.Counter(
            f"{m} {c}" for s, m, c in probe.syncs if s in unlogged
        ).most_common(),
        sync_callers_logged=collections.Counter(f"{m} {c}" for s, m, c in probe.syncs if s in logged).most_common(),
    )
    return out


def run_studio(args: argparse.Namespace, work: Path) -> dict:
    sys.path.insert(0, args.root)
    from engine.core.events import read_all
    from engine.spec.schema import RunSpec, save_spec
    from engine.trainer.train import train

    spec = RunSpec.model_validate(
        {
            "model": {"name_or_path": args.model},
            "method": {
                "stage": "sft",
                "finetuning": "lora",
                "lora": {"rank": args.rank, "alpha": 2 * args.rank, "targets": ["all"]},
            },
            "data": {
                "datasets": ["demo_alpaca"],
                "dataset_dir": str(Path(args.data).parent),
                "template": "auto",
                "cutoff_len": 256,
                "packing": True,
            },
            "train": {
                "max_steps": args.steps,
                "per_device_batch_size": 2,
                "gradient_accumulation": 1,
                "learning_rate": 1e-3,
                "logging_steps": args.logging_steps,
                "save_strategy": "no",
                "gradient_checkpointing": "off",
                "precision": "fp32",
            },
            "launch": {"device": "cpu"},
            "output": {"report_to": ["none"]},
        }
    )
    run_dir = work / f"run-{args.config.replace(' ', '-')}-{args.mode}"
    run_dir.mkdir(parents=True)
    save_spec(spec, run_dir / "spec.yaml")
    assert train(spec, run_dir, run_dir / "events.jsonl") == 0
    started = next(e for e in read_all(run_dir / "events.jsonl") if e["type"] == "run_started")["payload"]
    return {
        "per_sample_attention": started["per_sample_attention"],
        "trained_logits_only": started["trained_logits_only"],
    }


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
    argv += ["--logging-steps", str(a.logging_steps), "--rank", str(a.rank)]
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
        ("wall ms per step (profiled)", "wall_per_step_ms"),
        ("of which in aten operators, ms", "op_per_step_ms"),
        ("outside operators (Python, framework), ms", "outside_ms"),
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
        args.config = args.child
        print("STEP_OVERHEAD " + json.dumps(run_child(args)), flush=True)
        return 0

    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="step-overhead-") as tmp:
        tmp = Path(tmp)
        model, data = build_model(tmp / "home", args.layers, args.hidden)
        configs = {"plain": ROOT}
        if args.before:
            configs["studio before"] = unpack(args.before, tmp / "before")
        configs["studio"] = ROOT
        results: dict[str, dict] = {}
        for name, root in configs.items():
            counted = child(name, "counted", root, model, data, tmp / "work" / f"{len(results)}c", args)
            timed = child(name, "timed", root, model, data, tmp / "work" / f"{len(results)}t", args)
            r = {**counted, **{k: timed[k] for k in ("wall_per_step_ms", "op_per_step_ms")}}
            r["ops_per_layer"] = round(r["ops_per_layer_fwd"] + r["ops_per_layer_bwd"], 2)
            r["syncs_per_unlogged_step"] = round(r["syncs_unlogged_steps"] / max(1, r["unlogged_steps"]), 2)
            r["syncs_per_logged_step"] = round(r["syncs_logged_steps"] / max(1, r["logged_steps"]), 2)
            r["outside_ms"] = round(r["wall_per_step_ms"] - r["op_per_step_ms"], 2)
            results[name] = r
    text = table(results, args, load)
    print(text)
    Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
