"""Time and cost before launch: the run's tokens and optimizer steps (``engine.plan.counts``), its training FLOPs from
the model shape and method, and the expected duration against the target's compute, then the cost at a price per
GPU-hour. Light: stdlib and engine's light modules (never torch).

Throughput model (per token of a training row, N = the weights that multiply: every Linear in the decoder layers and
the output layer, not the embedding lookup):
- forward 2N + attention 4·L·(heads·head_dim)·span (QKᵀ and A·V; span = the tokens a token attends to);
- full fine-tuning: backward twice the forward (activation and weight gradients): 3 × forward = 6N + attention;
- frozen base (LoRA / OFT / freeze): backward through the frozen weights needs only the activation gradients (2N and
  twice the attention), plus weight gradients of what trains (2 per trainable base weight) and the adapters'
  forward and backward (6 per adapter weight): ~4N + adapters;
- gradient checkpointing recomputes one forward; DPO / KTO add the reference model's forward (the base with the
  adapter off, or the frozen copy).
GPU: seconds = FLOPs / (GPUs × dense 16-bit peak × efficiency) + each process's forward-backward passes (micro-
batches) × layers × a per-layer cost (kernel launches, Python; a LoRA layer costs more than a plain one), both fitted
on real H200 runs (``bench/gpu_efficiency.py``). CPU: seconds = a per-run cost + steps × a per-step
cost + FLOPs / a measured rate: the constants fitted on this machine by ``bench/estimate_error.py --calibrate``
(figures and date in ``bench/results/estimate_calibration.md``). Padding: padding-free and packed rows compute on
real tokens only; padded batches on the batch's longest row (its expectation over random batches, from the lengths).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from engine.plan.counts import DataCounts, count, optimizer_steps, seen
from engine.plan.messages import message
from engine.plan.model_shape import ModelShape, model_shape, trainable

# Dense (no sparsity) bf16 / fp16 tensor peak per GPU in FLOP/s, and a default on-demand price in USD per GPU-hour
# (editable in the plan panel and with --price-per-hour; ballpark list prices of GPU clouds, late 2025).
# Matched on the lower-cased device name, first match wins (so "a100" is tried before "a10", "l40s" before "l4").
GPUS: list[tuple[str, str, float, float]] = [
    # (match, shown name, peak FLOP/s, USD/h)
    ("h200", "H200", 989.4e12, 3.80),  # NVIDIA H200 datasheet: BF16 1,979 TFLOPS with sparsity -> 989 dense
    ("h100 pcie", "H100 PCIe", 756e12, 2.50),  # H100 datasheet, PCIe: 1,513 with sparsity -> 756 dense
    ("h100 nvl", "H100 NVL", 835e12, 2.80),  # H100 datasheet, NVL: 1,671 with sparsity -> 835 dense
    ("h100", "H100", 989.4e12, 3.00),  # H100 datasheet, SXM: 1,979 with sparsity -> 989 dense
    ("gh200", "GH200", 989.4e12, 3.50),  # GH200 datasheet: same Hopper tensor cores as H100 SXM
    ("b200", "B200", 2250e12, 6.00),  # HGX B200 datasheet: FP16/BF16 4.5 PFLOPS with sparsity per GPU -> 2.25 dense
    ("a100", "A100", 312e12, 1.80),  # A100 datasheet: BF16 312 TFLOPS dense (624 with sparsity)
    ("a10g", "A10G", 70e12, 1.00),  # AWS G5 (A10G): 70 TFLOPS fp16 dense tensor (NVIDIA/AWS spec sheet)
    ("a10", "A10", 125e12, 0.75),  # A10 datasheet: BF16 125 TFLOPS dense (250 with sparsity)
    ("l40s", "L40S", 362e12, 1.00),  # L40S datasheet: BF16 362.05 TFLOPS dense (733 with sparsity)
    ("l40", "L40", 181e12, 0.90),  # L40 datasheet: BF16 181 TFLOPS dense (362 with sparsity)
    ("l4", "L4", 121e12, 0.70),  # L4 datasheet: BF16 121 TFLOPS dense (242 with sparsity)
    ("a6000", "RTX A6000", 154.8e12, 0.80),  # RTX A6000 datasheet: tensor 309.7 TFLOPS with sparsity -> 154.8 dense
    ("4090", "RTX 4090", 165.2e12, 0.70),  # Ada whitepaper: 4090 FP16/BF16 tensor, FP32 accumulate, 165.2 dense
    ("3090", "RTX 3090", 71e12, 0.40),  # GA102 whitepaper: 3090 FP16 tensor, FP32 accumulate, 71 dense
    ("v100", "V100", 125e12, 0.80),  # V100 datasheet (SXM2): 125 TFLOPS fp16 tensor (no bf16)
    ("t4", "T4", 65e12, 0.35),  # T4 datasheet: 65 TFLOPS fp16 mixed precision (no bf16)
    ("mi300x", "MI300X", 1307.4e12, 3.00),  # AMD Instinct MI300X datasheet: BF16 1,307.4 TFLOPS dense
    ("mi250", "MI250X", 383e12, 1.50),  # AMD Instinct MI250X datasheet: BF16 383 TFLOPS
]
# Memory per GPU in GiB, by the shown name above (datasheets; the larger model where there are two: the A100 40GB,
# V100 16GB take --gpu-mem): what `studio plan --gpu NAME` plans memory against when no --gpu-mem is given.
MEMORY_GIB = {
    "H200": 141,
    "H100 PCIe": 80,
    "H100 NVL": 94,
    "H100": 80,
    "GH200": 96,
    "B200": 180,
    "A100": 80,
    "A10G": 24,
    "A10": 24,
    "L40S": 48,
    "L40": 48,
    "L4": 24,
    "RTX A6000": 48,
    "RTX 4090": 24,
    "RTX 3090": 24,
    "V100": 32,
    "T4": 16,
    "MI300X": 192,
    "MI250X": 128,
}
# Share of the peak a fine-tuning run's matmuls reach, and what each layer of each forward-backward pass costs
# besides (kernel launches and Python, which leave a large GPU idle on a small model). Fitted on a lent H200
# (bench/results/gpu_efficiency.md, 2026-12-04; bf16, packed rows of 1024, batch 4, the seconds per step of 10 vs
# 40 and 5 vs 15 step runs): LoRA r16 on a Llama-3-8B shape (0.702 s a step, 32 layers) and on a ~0.5B model (0.260 s,
# 24 layers) give the efficiency and the adapter layer's cost (two runs, two unknowns: exact); full fine-tuning of the
# ~0.5B (0.141 s) gives the plain layer's. A single efficiency would have needed 18% for the 8B and 3.5% for the 0.5B.
# 0.33 is near the MFU usually reported for 16-bit fine-tuning on A100 / H100 (PaLM: 46% pre-training at scale).
GPU_EFFICIENCY = 0.33
GPU_LAYER_SECONDS = {"adapter": 0.0097, "full": 0.0042}  # per layer per forward-backward pass, per process
FP32_SHARE = 0.5  # fp32 matmuls run as TF32 on Ampere and later: half the 16-bit tensor peak (A100 156 vs 312)
# CPU, fitted by ``bench/estimate_error.py --calibrate`` on this machine (2 cores, one thread per process) against
# the training loop's process CPU time of 6 demo runs (2026-12-04, load average 4-5; bench/results/
# estimate_calibration.md has the runs and the fit): what one core takes. The fit of 2026-12-01 (0.0422 s per step,
# 1.96e10 FLOP/s) was made at load 12-18, where the same runs took 2.5-3x the CPU time: an estimate 3x too long on a
# quiet machine. Two processes spinning on both cores moved today's runs by -5% to +35% (bench/estimate_error.py).
CPU_FLOPS = 4.75e10  # FLOP/s one process reaches on the model's matmuls
CPU_STEP_SECONDS = 0.0081  # per optimizer step, besides the FLOPs: Python, the optimizer, the events callback
CPU_RUN_SECONDS = 0.369  # per run: the first step's warm-up and the final checkpoint


def gpu_entry(name: str) -> tuple[str, float, float] | None:
    """(shown name, peak FLOP/s, default USD/h) of a GPU by its device name (``NVIDIA H100 80GB HBM3``), or None."""
    low = (name or "").lower()
    for match, shown, peak, price in GPUS:
        if match in low:
            return shown, peak, price
    return None


def gpu_names() -> list[str]:
    return [shown for _, shown, _, _ in GPUS]


@dataclass
class Estimate:
    target: str  # "cpu" or a GPU's shown name
    devices: int  # GPUs (or CPU processes) the run uses
    steps: int
    counts: dict | None  # engine.plan.counts.DataCounts.to_dict(), None when the tokenizer is not local
    flops_per_token: float
    train_flops: float
    seconds: float | None  # expected duration of the training loop (evaluations included; model load excluded)
    price_per_hour: float | None  # USD per GPU-hour (CPU: None unless given)
    cost: float | None
    efficiency: float | None  # GPU: share of the peak assumed; CPU: None
    peak_flops: float | None
    notes: list = field(default_factory=list)
    generation_seconds: float | None = None  # stage grpo: generating's time beyond its FLOPs, within ``seconds``
    grpo: dict | None = None  # stage grpo: engine.plan.grpo_time.GrpoWork (prompt tokens, rounds, decode steps)
    overhead_seconds: float | None = None  # GPU: the passes' per-layer cost, within ``seconds``
    passes: int | None = None  # GPU: forward-backward passes (micro-batches) per process

    def to_dict(self) -> dict:
        out = asdict(self)
        out["minutes"] = None if self.seconds is None else round(self.seconds / 60, 2)
        return out


def matmul_params(shape: ModelShape) -> int:
    """Weights a token multiplies through: every Linear of the layers (routed experts only) and the output layer."""
    n = 0
    for p in shape.params:
        if p.linear and p.layer is not None:
            n += p.numel
        elif p.linear == "lm_head":
            n += p.numel
    if shape.experts:  # each token goes through experts_per_token of the experts
        expert = sum(p.numel for p in shape.params if ".experts." in p.name)
        n -= expert - expert * shape.experts_per_token // max(shape.experts, 1)
    if shape.tied:  # the tied embedding is the output layer's matmul
        n += shape.vocab * shape.hidden
    return n


def attention_per_token(shape: ModelShape, span: float) -> float:
    """QKᵀ and A·V FLOPs of one token attending to ``span`` tokens, one forward: 4 x layers x heads x dim x span."""
    return 4.0 * shape.layers * shape.heads * shape.head_dim * span


def forward_per_token(shape: ModelShape, span: float) -> float:
    """One forward's FLOPs per token: 2N and its attention."""
    return 2.0 * matmul_params(shape) + attention_per_token(shape, span)


def flops_per_token(spec, shape: ModelShape, span: float) -> float:
    """Training FLOPs per token of a row whose tokens attend to ``span`` tokens (the model above)."""
    n = matmul_params(shape)
    attn = attention_per_token(shape, span)
    fwd = 2.0 * n + attn
    tr = trainable(spec, shape)
    if spec.method.finetuning == "full":
        total = 3 * fwd
    else:
        total = fwd + (2.0 * n + 2 * attn) + 2.0 * tr.base_numel + 6.0 * tr.adapter_numel
    if spec.train.gradient_checkpointing == "on":
        total += fwd
    if spec.method.stage in ("dpo", "kto"):
        total += fwd  # the reference model's forward
    return total


def _computed_tokens(spec, counts: DataCounts) -> float:
    """Tokens the model computes per training row on average: real tokens for padding-free and packed batches, the
    batch's longest row times the batch otherwise (its expectation over batches drawn at random)."""
    rows = counts.row_tokens
    if not rows:
        return 0.0
    d = spec.data
    flat = d.packing or (spec.method.stage not in ("dpo", "kto", "rm") and d.padding_free in ("auto", "on"))
    if flat:
        return sum(rows) / len(rows)
    b = spec.train.per_device_batch_size
    s = sorted(rows)
    n = len(s)
    expected_max = sum(v * (((i + 1) / n) ** b - (i / n) ** b) for i, v in enumerate(s))
    return expected_max


def _evaluations(spec, steps: int) -> int:
    t = spec.train
    if not (spec.data.eval_datasets or spec.data.val_size > 0) or t.eval_strategy == "no":
        return 0
    if t.eval_strategy == "epoch":
        return max(1, round(t.num_epochs)) if t.max_steps <= 0 else 1
    return steps // max(1, t.eval_steps or 1)


def estimate(
    spec,
    *,
    hardware=None,
    gpu: str | None = None,
    price_per_hour: float | None = None,
    model_config: dict | None = None,
    counts: DataCounts | None = None,
) -> Estimate:
    """The run's steps, tokens, expected duration and cost. ``gpu``: the target GPU's name (one of ``gpu_names`` or
    a device name); else the GPUs ``hardware`` found; else the CPU. ``price_per_hour`` replaces the GPU's default."""
    from engine.models.resolve import resolve_model

    if model_config is None:
        resolved = resolve_model(spec.model)
        if not resolved.found:
            raise ValueError(message("plan.no_config", path=spec.model.name_or_path, why=resolved.problem or ""))
        model_config = resolved.config
    shape = model_shape(model_config)
    notes: list = []
    if counts is None:
        try:
            counts = count(spec)
        except (ValueError, OSError) as exc:  # data not readable here (not registered, a hub dataset not fetched)
            notes.append(message("estimate.no_data", why=" ".join(str(exc).split())[:300]))
        else:
            if counts is None:
                notes.append(message("estimate.no_tokenizer", path=spec.model.name_or_path))
    elif not counts.exact and not any(getattr(n, "key", "") == "estimate.approx_tokens" for n in counts.notes):
        notes.append(message("estimate.approximate"))
    if counts is not None:
        notes += counts.notes
    rows = counts.train_rows if counts else 0
    steps = optimizer_steps(spec, rows) if counts else (spec.train.max_steps if spec.train.max_steps > 0 else 0)
    devices = max(1, spec.world_size)
    rows_per_process, passes = seen(spec, rows, steps)
    # the target: a GPU named, else this machine's, else the CPU
    device = spec.launch.device
    entry = None
    if device != "cpu":
        if gpu:
            entry = gpu_entry(gpu)
            if entry is None:
                notes.append(message("estimate.unknown_gpu", gpu=gpu, known=", ".join(gpu_names())))
        elif hardware is not None and getattr(hardware, "gpus", None):
            entry = gpu_entry(hardware.gpus[0].name)
            if entry is None:
                notes.append(message("estimate.unknown_gpu", gpu=hardware.gpus[0].name, known=", ".join(gpu_names())))
    if device != "cpu" and entry is None and (gpu or (hardware is not None and getattr(hardware, "gpus", None))):
        counts_d = counts.to_dict() if counts else None
        fpt = flops_per_token(spec, shape, spec.data.cutoff_len)
        return Estimate(gpu or hardware.gpus[0].name, devices, steps, counts_d, fpt, 0.0, None, price_per_hour, None,
                        None, None, notes)  # fmt: skip
    if counts is None or not counts.row_tokens:
        fpt = flops_per_token(spec, shape, spec.data.cutoff_len)
        return Estimate(
            entry[0] if entry else "cpu", devices, steps, counts.to_dict() if counts else None, fpt, 0.0, None,
            price_per_hour, None, None, None, notes,
        )  # fmt: skip
    lens = counts.row_tokens
    span = sum(n * n for n in lens) / max(1, sum(lens))  # the tokens a token attends to, weighted by tokens
    if spec.data.packing and spec.model.packed_attention == "off":
        span = sum(lens) / len(lens)  # a packed row under one causal mask: the whole row
    fpt = flops_per_token(spec, shape, span)
    per_row = _computed_tokens(spec, counts)
    t = spec.train
    if t.max_steps > 0:  # a dataset smaller than a step: each step sees the whole epoch (engine.plan.counts.seen)
        rows_seen = rows_per_process * devices
    else:
        rows_seen = t.num_epochs * rows
    train_flops = rows_seen * per_row * fpt
    grpo = None
    if spec.method.stage == "grpo":  # completions generated, then trained on (engine.plan.grpo_time)
        from engine.plan import grpo_time

        grpo = grpo_time.work(
            spec, shape, counts, steps,
            flops_per_token=lambda s: flops_per_token(spec, shape, s),
            forward_per_token=lambda s: forward_per_token(shape, s),
            total_params=shape.total, head=shape.vocab * shape.hidden,
        )  # fmt: skip
        fpt = flops_per_token(spec, shape, grpo.sequence_tokens)
        train_flops = grpo.flops * devices
        passes = steps * t.gradient_accumulation  # trained on its completions, per-device batch x accumulation
    eval_flops = 0.0
    evals = _evaluations(spec, steps)
    if evals and counts.eval_rows:
        fwd = (
            flops_per_token(spec, shape, span) / 3 if spec.method.finetuning == "full" else 2.0 * matmul_params(shape)
        )
        eval_flops = evals * counts.eval_rows * per_row * fwd
    flops = train_flops + eval_flops
    price = price_per_hour
    if entry is not None:
        shown, peak, default_price = entry
        precision = spec.train.precision
        peak_used = peak * (FP32_SHARE if precision == "fp32" else 1.0)
        kind = "full" if spec.method.finetuning in ("full", "freeze") else "adapter"
        overhead = passes * shape.layers * GPU_LAYER_SECONDS[kind]
        seconds = flops / (devices * peak_used * GPU_EFFICIENCY) + overhead
        gen = _generation(grpo, shown, notes, shape.layers)
        seconds += gen or 0.0
        price = default_price if price is None else price
        cost = seconds / 3600 * devices * price
        return Estimate(
            shown, devices, steps, counts.to_dict(), fpt, flops, seconds, price, cost, GPU_EFFICIENCY, peak_used,
            notes, gen, asdict(grpo) if grpo else None, overhead, passes,
        )  # fmt: skip
    parallel = max(1, min(devices, os.cpu_count() or 1))
    seconds = CPU_RUN_SECONDS + steps * CPU_STEP_SECONDS * (devices / parallel) + flops / (CPU_FLOPS * parallel)
    gen = _generation(grpo, "cpu", notes, shape.layers)
    if gen:
        gen *= devices / parallel
        seconds += gen
    notes.append(message("estimate.cpu"))
    cost = None if price is None else seconds / 3600 * price
    return Estimate(
        "cpu", devices, steps, counts.to_dict(), fpt, flops, seconds, price, cost, None, CPU_FLOPS, notes, gen,
        asdict(grpo) if grpo else None,
    )  # fmt: skip


def _generation(grpo, target: str, notes: list, layers: int) -> float | None:
    """A GRPO run's sequential decoding beyond its FLOPs (engine.plan.grpo_time), with a note that says what was
    assumed; None for other stages, or a GPU whose memory bandwidth is not in the table."""
    if grpo is None:
        return None
    from engine.plan import grpo_time

    gen = grpo_time.decode_seconds(grpo, target, layers)
    notes.append(
        message(
            "estimate.grpo", generated=grpo.generated, rounds=grpo.rounds, steps=grpo.decode_steps,
            prompt=round(grpo.prompt_tokens), tokens=round(grpo.sequence_tokens - grpo.prompt_tokens),
        )
    )  # fmt: skip
    if gen is None:
        notes.append(message("estimate.grpo_no_bandwidth", gpu=target))
    return gen


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def fmt_cost(cost: float | None) -> str:
    if cost is None:
        return "?"
    return "< $0.01" if cost < 0.01 else f"${cost:,.2f}"


def render(est: Estimate) -> str:
    """Text lines for ``studio plan``."""
    c = est.counts or {}
    lines = []
    if c:
        lines.append(
            f"data: {c['samples']} samples, {c['tokens']:,} tokens after the template and cutoff "
            f"({c['trained_tokens']:,} trained), {c['train_rows']} training rows per epoch"
        )
    lines.append(f"steps: {est.steps}")
    where = f"{est.devices} x {est.target}" if est.target != "cpu" else f"CPU ({est.devices} process(es))"
    lines.append(f"expected duration on {where}: {fmt_duration(est.seconds)} (training loop; model load excluded)")
    if est.efficiency is not None and est.peak_flops:
        lines.append(
            f"  from {est.train_flops:.3g} FLOPs at {est.peak_flops / 1e12:.0f} TFLOPS peak x {est.efficiency:.0%}"
        )
    if est.overhead_seconds:
        lines.append(
            f"  and {est.passes:,} forward-backward passes per process at a fixed cost per layer (kernel launches): "
            f"{fmt_duration(est.overhead_seconds)}"
        )
    if est.generation_seconds:
        lines.append(f"  of which generating completions one token at a time: {fmt_duration(est.generation_seconds)}")
    if est.cost is not None:
        lines.append(f"cost: {fmt_cost(est.cost)} at ${est.price_per_hour:g} per GPU-hour")
    lines += [f"note: {n}" for n in est.notes]
    return "\n".join(lines)
