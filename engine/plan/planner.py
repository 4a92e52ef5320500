"""Memory planner: predicted peak memory per GPU for a spec, from the model's ``config.json`` (no weights loaded).

Light: stdlib, yaml and engine's light modules (spec, plan_model, hardware, events). Never imports torch.

The model follows what actually runs (transformers Trainer + torch AMP + PEFT + DeepSpeed/FSDP):
- dtypes (``resolve_dtypes``): ``model.dtype: auto`` loads full/freeze in fp32 (AMP autocasts the matmuls; fp32 params
  are their own master copy, so no extra copy exists) and LoRA bases in the 16-bit compute dtype; PEFT upcasts
  adapters to fp32. An explicit 16-bit dtype for full training means pure 16-bit params, grads and Adam states.
- peak: the larger of (a) forward/backward: weights + optimizer states + activations + loss buffers, plus every
  gradient when accumulating (grads of the previous micro-step are alive during the next forward) or only the
  layers outside the decoder stack at the start of backward otherwise; (b) optimizer step: weights + grads + states
  + the foreach temporaries. ``components`` are the amounts alive at that peak; ``peak_phase`` says which.
- ``framework`` is a documented constant: CUDA context + cuBLAS workspaces (~500 MiB) that
  ``torch.cuda.max_memory_allocated`` does not see; ``compare`` subtracts it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.core.units import memory_size
from engine.machine.hardware import auto_precision
from engine.machine.kernels import (
    MASK_BIAS_NOTE_BYTES,
    attention_bias_bytes,
    liger_decision,
    packed_attention_decision,
    packed_row_tokens,
)
from engine.models.resolve import resolve_model, source_text
from engine.plan import grpo_memory, memory, vision_data, vision_shape
from engine.plan.memory import activation_bytes, logits_bytes, optimizer_bytes, reference_bytes, weight_bytes
from engine.plan.messages import message
from engine.plan.model_shape import model_shape, trainable

GiB = 2**30
MiB = 2**20
CUDA_CONTEXT_BYTES = 500 * MiB  # CUDA context + cuBLAS/cuDNN workspaces, outside torch's allocator
ALLOCATOR_SLACK = 0.05  # caching-allocator fragmentation between allocated and reserved, as a fraction

COMPONENTS = (
    "weights",
    "trainable_weights",
    "reference_model",
    "gradients",
    "optimizer_states",
    "activations",
    "logits_loss",
    "comm_buffers",
    "step_temporaries",
    "framework",
)


@dataclass
class MemoryPlan:
    components: dict[str, int]  # bytes per GPU alive at the peak, keys in COMPONENTS order
    total_bytes: int  # per GPU, including the framework constant
    gpu_mem_bytes: int | None
    fits: bool | None  # None: no GPU memory known
    cpu_ram_bytes: int  # host RAM the run needs on each machine (offloaded states/params + a loading copy)
    peak_phase: str  # "forward_backward" | "optimizer_step" | "generation" (stage grpo)
    notes: list[str] = field(default_factory=list)
    approximate: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # params, trainable, dtypes, world size, per-phase totals
    checkpointing: bool | None = None  # gradient checkpointing as planned (auto resolved) and why
    checkpointing_reason: str = ""

    @property
    def allocated_bytes(self) -> int:
        """What torch.cuda.max_memory_allocated should read: everything but the framework constant."""
        return self.total_bytes - self.components.get("framework", 0)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["allocated_bytes"] = self.allocated_bytes
        out["total_gib"] = round(self.total_bytes / GiB, 3)
        out["gpu_mem_gib"] = None if self.gpu_mem_bytes is None else round(self.gpu_mem_bytes / GiB, 3)
        return out


def planned_precision(spec, hardware=None, gpu_mem_gib: float | None = None) -> str:
    """bf16 | fp16 | fp32, as the launch will pick it (``engine.machine.hardware.auto_precision``); with no GPU here
    but a GPU size typed in (``gpu_mem_gib``), the plan is for that GPU: bf16."""
    p = spec.train.precision
    if p != "auto":
        return p
    gpus = hardware.gpus if hardware is not None else []
    if spec.launch.device == "cpu" or gpus:
        return auto_precision("cpu" if spec.launch.device == "cpu" else "cuda", gpus)
    return "bf16" if gpu_mem_gib else "fp32"


def planned_device(spec, hardware=None, gpu_mem_gib: float | None = None) -> str | None:
    """Where the run will train, as the launch decides it: the spec's device, else a GPU when this machine has one
    or a GPU size is typed in, else (this machine known to have none) the CPU; None when nothing says."""
    if spec.launch.device != "auto":
        return spec.launch.device
    if gpu_mem_gib or (hardware is not None and hardware.gpus):
        return "cuda"
    return "cpu" if hardware is not None else None


def resolve_dtypes(spec, precision: str) -> dict[str, int]:
    """Bytes per element: base (frozen/loaded) weights, trainable base weights, adapters, compute, residual stream."""
    compute = 2 if precision in ("bf16", "fp16") else 4
    explicit = {"bfloat16": 2, "float16": 2, "float32": 4}.get(spec.model.dtype)
    if spec.method.adapter:
        base = explicit or compute
        if spec.method.quantization.bits and spec.method.quantization.compute_dtype != "auto":
            base = {"bfloat16": 2, "float16": 2, "float32": 4}[spec.method.quantization.compute_dtype]
        adapter = 4  # PEFT autocast_adapter_dtype upcasts 16-bit adapters to fp32
        if spec.method.quantization.bits:
            # prepare_model_for_kbit_training (engine.trainer.model) casts every non-quantized tensor to fp32:
            # embeddings, norms, lm_head; the residual stream is then fp32 too.
            return {"base": 4, "trainable": 4, "adapter": 4, "compute": min(compute, base), "residual": 4}
    else:
        base = explicit or 4
        adapter = 4
    return {"base": base, "trainable": base, "adapter": adapter, "compute": min(compute, base), "residual": base}


# Gradient checkpointing "auto" turns it off only when the plan without it fits in (1 - margin) of the memory: on an
# H200 the planner came within 10% of the measured peak on 13 of bench/plan_calibration.py's 14 rows (8-bit QLoRA:
# 10.9% under; bench/results/plan_calibration.md, checked by tests/engine/test_plan_gpu_measured.py), so a plan
# that fits with a 10% margin fits for real; closer than that, recomputing activations is the safe choice.
CHECKPOINTING_MARGIN = 0.10


def plan(spec, *, gpu_mem_gib: float | None = None, hardware=None, model_config: dict | None = None) -> MemoryPlan:
    """Predict per-GPU peak memory for ``spec``. ``model_config`` overrides reading the model folder's config.json.
    Gradient checkpointing ``auto`` is resolved here (``MemoryPlan.checkpointing`` and its reason): the trainer, the
    plan panel and ``studio plan`` all take the decision from this one place."""
    mode = spec.train.gradient_checkpointing
    kw = {"gpu_mem_gib": gpu_mem_gib, "hardware": hardware, "model_config": model_config}
    if mode != "auto":
        mp = _plan(spec, **kw)
        mp.checkpointing, mp.checkpointing_reason = mode == "on", message(f"plan.ckpt_{mode}")
        return mp
    off = _plan(_with_checkpointing(spec, "off"), **kw)
    budget = off.gpu_mem_bytes
    where = "GPU"
    if budget is None and planned_device(spec, hardware, gpu_mem_gib) == "cpu":
        budget, where = _host_budget(spec), "host"
    if budget is None:
        mp = _plan(_with_checkpointing(spec, "on"), **kw)
        mp.checkpointing, mp.checkpointing_reason = True, message("plan.ckpt_auto_unknown")
        return mp
    limit = (1 - CHECKPOINTING_MARGIN) * budget
    if off.total_bytes <= limit:
        off.checkpointing = False
        off.checkpointing_reason = message(
            "plan.ckpt_auto_off", need=memory_size(off.total_bytes), limit=memory_size(limit), where=where
        )
        return off
    on = _plan(_with_checkpointing(spec, "on"), **kw)
    on.checkpointing = True
    on.checkpointing_reason = message(
        "plan.ckpt_auto_on", need=memory_size(off.total_bytes), limit=memory_size(limit), where=where
    )
    return on


def _with_checkpointing(spec, value: str):
    out = spec.model_copy(deep=True)
    out.train.gradient_checkpointing = value
    return out


def _host_budget(spec) -> int | None:
    """A CPU run's memory: the RAM a new process can use on this machine, shared by the run's processes."""
    from engine.machine.hardware import available_memory

    got = available_memory()
    return None if not got else int(got[0] / max(1, spec.launch.num_processes))


def _plan(spec, *, gpu_mem_gib: float | None = None, hardware=None, model_config: dict | None = None) -> MemoryPlan:
    source_note = None
    if model_config is not None:
        config = model_config
    else:
        resolved = resolve_model(spec.model)
        if not resolved.found:
            raise ValueError(message("plan.no_config", path=spec.model.name_or_path, why=resolved.problem or ""))
        config = resolved.config
        if resolved.source != "local":  # a local folder is what the user typed: no need to say so
            source_note = source_text(resolved)
    shape = model_shape(config)
    precision = planned_precision(spec, hardware, gpu_mem_gib)
    dt = resolve_dtypes(spec, precision)
    tr = trainable(spec, shape)
    notes = ([source_note] if source_note else []) + list(shape.notes)
    ws = spec.world_size
    ln = spec.launch
    t = spec.train
    ds = ln.deepspeed if ln.backend == "deepspeed" else None
    fsdp = ln.fsdp if ln.backend == "fsdp" else None
    zero = ds.zero_stage if ds else 0
    shard_n = ws
    if fsdp and fsdp.sharding_strategy == "HYBRID_SHARD":
        shard_n = ln.num_processes
    full_shard = zero == 3 or (fsdp is not None and fsdp.sharding_strategy in ("FULL_SHARD", "HYBRID_SHARD"))
    grad_shard = zero >= 2 or (fsdp is not None and fsdp.sharding_strategy != "NO_SHARD")
    opt_shard = zero >= 1 or (fsdp is not None and fsdp.sharding_strategy != "NO_SHARD")

    # ---- weights (frozen + trainable base), by dtype / quantization
    w_frozen, w_train = weight_bytes(spec, shape, tr, dt)
    train_numel = tr.numel
    train_bytes_each = dt["adapter"] if spec.method.adapter else dt["trainable"]
    adapter_bytes = tr.adapter_numel * dt["adapter"]
    w_train_total = w_train + adapter_bytes
    if ds and ds.zero_stage >= 1 and precision in ("bf16", "fp16"):
        # DeepSpeed bf16/fp16 casts the module to 16 bit and keeps fp32 master copies inside the optimizer.
        w_train_total = train_numel * 2
        train_bytes_each = 2
    weights_gpu = w_frozen + w_train_total
    param_offload = (ds is not None and ds.offload_param != "none") or (fsdp is not None and fsdp.offload_params)
    if full_shard:
        layer_bytes = weights_gpu / max(shape.layers, 1)
        gathered = 2 * layer_bytes  # the layer in use and the prefetched next one
        if param_offload:
            weights_gpu = gathered
        else:
            weights_gpu = weights_gpu / shard_n + gathered
        notes.append(message("plan.sharded", n=shard_n))

    # ---- TRL's reference model (dpo, kto without LoRA): frozen, sharded like the policy under ZeRO-3 / FSDP
    ref = reference_bytes(spec, shape, dt)
    if ref:
        ref = ref / shard_n if full_shard and spec.method.stage != "sft" else ref  # asft's copy is whole (trainer)
        notes.append(message("plan.reference_model", stage=spec.method.stage))
    if spec.method.stage == "rm":
        notes.append(message("plan.reward_head"))
    # ---- GRPO's reward models: frozen sequence classifiers, whole in every process (never sharded)
    on_gpu = planned_device(spec, hardware, gpu_mem_gib) != "cpu"
    rms = grpo_memory.reward_models_bytes(spec, precision if on_gpu else "fp32")
    if rms:
        ref += rms
        notes.append(message("plan.reward_models", size=f"{rms / GiB:.2f} GiB"))

    # ---- gradients (dtype of the trainable params; DeepSpeed reduces 16-bit grads)
    grad_bytes = train_numel * train_bytes_each
    comm = 0
    if ln.backend == "ddp" and ws > 1:
        comm += grad_bytes  # DDP buckets hold a second copy of every gradient (gradient_as_bucket_view=False)
    if grad_shard:
        grad_bytes = grad_bytes / shard_n
    if ds and ds.zero_stage in (1, 2) and ws >= 1:
        elem = 4 if ds.zero_stage == 1 else train_bytes_each
        comm += min(ds.reduce_bucket_size, max(train_numel, 1)) * elem * (2 if ds.overlap_comm else 1)
    if ds and ds.zero_stage == 3:
        comm += min(ds.reduce_bucket_size, max(train_numel, 1)) * train_bytes_each

    # ---- optimizer states
    opt_gpu, _, step_tmp = optimizer_bytes(spec, shape, tr, train_bytes_each, precision)
    opt_static = opt_gpu
    opt_offload = (ds is not None and ds.offload_optimizer != "none") or param_offload
    cpu_ram = 0
    if opt_shard:
        opt_gpu = opt_gpu / shard_n
        step_tmp = step_tmp / shard_n
    if opt_offload:
        # DeepSpeed CPU Adam: fp32 master + 2 states + fp32 grads in pinned host memory, one partition per rank
        cpu_ram += train_numel * 16 * ln.num_processes / max(shard_n if opt_shard else 1, 1)
        opt_gpu, step_tmp = 0, 0
        notes.append(message("plan.offload_optimizer"))
    if param_offload:
        cpu_ram += (w_frozen + w_train_total) * ln.num_processes / shard_n
        notes.append(message("plan.offload_params"))

    # ---- activations and the loss buffers
    batch, seq = t.per_device_batch_size, spec.data.cutoff_len
    if spec.method.stage == "grpo":  # prompt + completion; the generation phase is planned below
        seq = grpo_memory.sequence_tokens(spec)
    planned = planned_device(spec, hardware, gpu_mem_gib)  # None: nothing says (no hardware known, no size typed)
    device = planned or "cpu"
    fused, _why = liger_decision(t.liger_kernel, device, shape.model_type, t.loss)
    loss = logits_bytes(spec, shape, dt, batch, seq, fused=fused)
    acts = activation_bytes(spec, shape, tr, dt, batch, seq, loss)
    per_sample = vision_data.sample_images(spec, shape.config) if shape.vision is not None else None
    if per_sample is not None:
        samples = batch * memory.sequences_per_sample(spec)
        acts += vision_shape.activation_bytes(spec, shape, tr, dt, samples, per_sample)
        notes += vision_shape.notes(spec, shape, tr, seq, per_sample)
    row = packed_row_tokens(spec)
    impl = spec.model.attn_implementation
    masked = row and not packed_attention_decision(spec.model.packed_attention, impl, config, device, row)[0]
    if masked and impl == "sdpa":
        # padding-free: one row of the micro-batch; packing: one row of the cutoff per sample slot
        # with checkpointing only the layer being recomputed holds its bias
        layers = 1 if spec.train.gradient_checkpointing == "on" else shape.layers
        bias = attention_bias_bytes(row, batch if spec.data.packing else 1, layers, dt["compute"])
        acts += bias
        if bias >= MASK_BIAS_NOTE_BYTES:
            notes.append(message("plan.mask_bias", size=f"{bias / GiB:.2f} GiB"))
    if fused:
        notes.append(message("plan.liger"))
    if spec.model.attn_implementation == "eager":
        notes.append(message("plan.eager"))
    if spec.method.finetuning == "oft":
        notes.append(message("plan.oft"))
    if t.optimizer in ("galore_adamw", "galore_adamw_8bit", "galore_adafactor", "apollo_adamw", "adam_mini", "muon"):
        notes.append(message("plan.optimizer_estimate", optimizer=t.optimizer))
    elif t.optimizer == "badam":
        notes.append(message("plan.badam"))

    # grads alive at the start of backward without accumulation: trainable tensors outside the layer stack
    # (a vision tower's and projector's gradients come last in backward: not alive yet)
    outside = sum(p.numel for p in shape.params if p.layer is None and not p.part)
    outside = outside if spec.method.finetuning == "full" else 0
    fb_grads = grad_bytes if t.gradient_accumulation > 1 else min(outside * train_bytes_each, grad_bytes)
    framework = CUDA_CONTEXT_BYTES
    fwd_bwd = {
        "weights": weights_gpu,
        "reference_model": ref,
        "gradients": fb_grads,
        "optimizer_states": opt_gpu,
        "activations": acts,
        "logits_loss": loss,
        "comm_buffers": comm,
    }
    step = {
        "weights": fwd_bwd["weights"],
        "reference_model": ref,
        "gradients": grad_bytes,
        "optimizer_states": opt_gpu,
        "step_temporaries": step_tmp,
        "comm_buffers": comm,
    }
    phase, alive = (
        ("forward_backward", fwd_bwd) if sum(fwd_bwd.values()) >= sum(step.values()) else ("optimizer_step", step)
    )
    if spec.method.stage == "grpo":
        # generating: the weights (and the reference) with every completion's KV cache, shown as activations
        kv = grpo_memory.kv_cache_bytes(spec, shape, dt)
        gen = {"weights": weights_gpu, "reference_model": ref, "optimizer_states": opt_gpu, "activations": kv}
        notes.append(
            message("plan.grpo_kv", n=grpo_memory.generation_batch(spec), tokens=seq, size=f"{kv / GiB:.2f} GiB")
        )
        if sum(gen.values()) > sum(alive.values()):
            phase, alive = "generation", gen
    comps = {k: 0 for k in COMPONENTS}
    for k, v in alive.items():
        comps[k] = int(v)
    comps["trainable_weights"] = int(min(w_train_total, comps["weights"]))
    comps["weights"] -= comps["trainable_weights"]
    comps["framework"] = framework
    total = sum(comps.values())
    total = int(total + ALLOCATOR_SLACK * (total - framework))
    comps["framework"] = framework + int(ALLOCATOR_SLACK * (total - framework) / (1 + ALLOCATOR_SLACK))
    total = sum(comps.values())

    # host RAM: offloaded state + one full copy while loading (low_cpu_mem_usage streams shards, so ~1 copy)
    cpu_ram += min(w_frozen + w_train_total, 16 * GiB) if not cpu_ram else 0
    gpu_bytes = None
    if gpu_mem_gib is not None:
        gpu_bytes = int(gpu_mem_gib * GiB)
    elif hardware is not None and hardware.gpus:
        gpu_bytes = min(g.memory_total_mib for g in hardware.gpus) * MiB
    fits = None if gpu_bytes is None else total <= gpu_bytes
    if planned == "cpu":
        notes.append(message("plan.cpu"))
    static = {
        "weights_bytes": int(w_frozen + w_train),
        "adapter_bytes": int(adapter_bytes),
        "gradient_bytes": int(train_numel * train_bytes_each),
        "optimizer_state_bytes": int(opt_static),
    }
    details = {
        "static": static,
        "params_total": shape.total,
        "trainable_params": train_numel,
        "trainable_tensors": tr.tensors,
        "precision": precision,
        "dtype_bytes": dt,
        "world_size": ws,
        "shard_over": shard_n if opt_shard else 1,
        "zero_stage": zero,
        "backend": ln.backend,
        "batch": batch,
        "seq_len": seq,
        "phase_totals": {"forward_backward": int(sum(fwd_bwd.values())), "optimizer_step": int(sum(step.values()))},
        "device": planned,
        "host_budget_bytes": _host_budget(spec) if planned == "cpu" else None,
        "model_type": shape.model_type,
        "layers": shape.layers,
        "hidden": shape.hidden,
        "heads": shape.heads,
        "kv_heads": shape.kv_heads,
        "vocab": shape.vocab,
    }
    if shape.vision is not None:
        details["vision"] = vision_shape.details(spec, shape, tr, per_sample)
    return MemoryPlan(comps, int(total), gpu_bytes, fits, int(cpu_ram), phase, notes, shape.approximate, details)


def parse_mem(text: str) -> float:
    """'24GiB', '24 GB', '80G', '24' -> GiB as float (GB is read as GiB: what nvidia-smi shows as total)."""
    s = str(text).strip().lower().replace(" ", "")
    for suffix, scale in (
        ("tib", 1024),
        ("tb", 1024),
        ("gib", 1),
        ("gb", 1),
        ("g", 1),
        ("mib", 1 / 1024),
        ("mb", 1 / 1024),
        ("m", 1 / 1024),
    ):
        if s.endswith(suffix):
            s, mult = s[: -len(suffix)], scale
            break
    else:
        mult = 1
    try:
        value = float(s) * mult
    except ValueError:
        raise ValueError(f"--gpu-mem: cannot read {text!r} as a memory size (e.g. 24GiB, 80G)") from None
    if not value > 0 or math.isinf(value):
        raise ValueError(f"--gpu-mem: {text!r} must be a positive size")
    return value


def compare(run_dir: str | Path) -> dict:
    """Predicted (plan.json) vs measured peaks (``finished`` event payload["memory"]) per rank, rows for the UI.

    ``memory`` may be a list of {rank, max_allocated_mib|max_allocated_bytes, max_reserved_...} or a dict rank -> same.
    """
    from engine.core.events import read_all

    run_dir = Path(run_dir)
    pred = None
    plan_path = run_dir / "plan.json"
    if plan_path.is_file():
        try:
            pred = json.loads(plan_path.read_text(encoding="utf-8"))
        except ValueError:
            pred = None
    measured: Any = None
    for ev in read_all(run_dir / "events.jsonl"):
        if ev["type"] in ("finished", "stopped", "failed", "log") and isinstance(
            ev["payload"].get("memory"), (list, dict)
        ):
            measured = ev["payload"]["memory"]
    rows = []
    items = measured.items() if isinstance(measured, dict) else enumerate(measured or [])
    p_alloc = pred.get("allocated_bytes") if pred else None
    p_total = pred.get("total_bytes") if pred else None
    for key, m in items:
        if not isinstance(m, dict):
            continue
        alloc = _bytes(m, "max_allocated") or _bytes(m, "peak")
        reserved = _bytes(m, "max_reserved") or _bytes(m, "reserved")
        rank = m.get("rank", key)
        err = None if not (alloc and p_alloc) else round(100.0 * (p_alloc - alloc) / alloc, 1)
        rows.append(
            {
                "rank": int(rank) if str(rank).isdigit() else rank,
                "predicted_allocated_bytes": p_alloc,
                "predicted_total_bytes": p_total,
                "measured_allocated_bytes": alloc,
                "measured_reserved_bytes": reserved,
                "error_pct": err,
            }
        )
    return {"predicted": pred, "rows": rows, "has_prediction": pred is not None, "has_measurement": bool(rows)}


def _bytes(m: dict, stem: str) -> int | None:
    for suffix, scale in (("_bytes", 1), ("_mib", MiB), ("", MiB)):
        v = m.get(stem + suffix)
        if isinstance(v, (int, float)):
            return int(v * scale)
    return None
