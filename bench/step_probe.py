"""The child of bench/step_overhead.py: one configuration trained once, its operators and read-backs counted
(``counted``) or its loop profiled (``timed``); and the LoRA decoder layer alone, eager or under torch.compile
(``layers``). Prints one ``STEP_OVERHEAD {json}`` line. Imported by name from its own folder (bench/ is not a
package); the training stack only inside functions.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
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
    if args.config == "layers":
        return run_layers(args)
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

            # steps 1-3 unprofiled (the first steps warm up), then PROFILED steps, once
            def ready(p):
                aten = [e for e in p.key_averages() if e.key.startswith("aten::")]
                holder["op_seconds"] = sum(e.self_cpu_time_total / 1e6 for e in aten)
                aten.sort(key=lambda e: -e.self_cpu_time_total)
                holder["top"] = [(e.key, round(e.self_cpu_time_total / 1e3 / PROFILED, 2), e.count) for e in aten[:8]]

            plan = schedule(wait=2, warmup=1, active=PROFILED, repeat=1)
            with profile(activities=[ProfilerActivity.CPU], schedule=plan, on_trace_ready=ready) as p:
                probe.profiler = p
                result = original_train(trainer, *a, **k)
            profiled = range(4, 4 + PROFILED)
            holder["wall"] = sum(probe.step_wall[s] for s in profiled)
            rest = sorted(w for s, w in probe.step_wall.items() if s >= 2 and s not in profiled)
            holder["median"] = rest[len(rest) // 2]
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
        out["median_step_ms"] = round(holder["median"] * 1000, 2)
        out["top_ops_ms"] = holder["top"]
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
            "model": {"name_or_path": args.model, "packed_attention": "mask" if "mask" in args.config else "auto"},
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


def run_layers(args: argparse.Namespace) -> dict:
    """The LoRA decoder layers alone (``--mode eager`` or ``compile``: torch.compile of each decoder layer), on one
    batch of two rows of 256 tokens with transformers' block-diagonal mask (per-sample attention loops over the
    batch's spans in Python, which a compiled layer would recompile for at every batch). Per layer and forward +
    backward, from the model at ``--layers`` and at half as many: the top-level aten operators that are not views and
    the compiled kernels (inductor's fused C++ kernels, each one launch), the profiled wall time of a step, and the
    seconds of the first step (with compile: compiling)."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(args.work) / "inductor")  # compiled from cold, not cached
    import torch
    import torch._inductor.config as inductor
    from peft import LoraConfig, get_peft_model
    from torch.profiler import ProfilerActivity, profile
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.set_num_threads(1)
    inductor.cpp.enable_kernel_profile = True  # a compiled kernel is a profiler event of its own
    out: dict = {"mode": args.mode}
    for layers in (args.layers // 2, args.layers):
        config = AutoConfig.from_pretrained(args.model, num_hidden_layers=layers, use_cache=False)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        model = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank, target_modules="all-linear"))
        decoder = [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]
        if args.mode == "compile":
            for layer in decoder:
                layer.compile(dynamic=False)
        ids = torch.randint(3, config.vocab_size, (2, 256), generator=torch.Generator().manual_seed(0))
        pos = torch.cat([torch.arange(n) for n in (40, 100, 116)]).expand(2, -1)

        def step(model=model, ids=ids, pos=pos):
            model(input_ids=ids, position_ids=pos, labels=ids, use_cache=False).loss.backward()

        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            step()
            wall = time.perf_counter() - t0
        launches = kernels = 0
        for e in prof.events():
            if "cpp_fused" in e.name:
                kernels += 1
            elif e.name.startswith("aten::") and e.name[6:] not in VIEW_OPS | {"empty", "empty_strided"}:
                parent = e.cpu_parent
                while parent is not None and not parent.name.startswith("aten::"):
                    parent = parent.cpu_parent
                launches += parent is None
        out[layers] = {"launches": launches, "kernels": kernels, "wall": wall, "first": first}
    half, full = out[args.layers // 2], out[args.layers]
    n = args.layers - args.layers // 2
    return {
        "mode": args.mode,
        "aten_per_layer": round((full["launches"] - half["launches"]) / n, 1),
        "kernels_per_layer": round((full["kernels"] - half["kernels"]) / n, 1),
        "launches_per_layer": round((full["launches"] + full["kernels"] - half["launches"] - half["kernels"]) / n, 1),
        "step_ms": round(full["wall"] * 1000, 1),
        "first_step_s": round(half["first"], 1),  # the first compile; the second model reuses its code
    }
