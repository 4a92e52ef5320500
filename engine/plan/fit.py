"""Auto-fit: walk the seed's out-of-memory ladder until the planned peak fits the GPU, explaining every step.

Light: stdlib + engine.spec.schema / engine.plan.planner (no torch). The ladder, in the seed's order (cheapest
slowdown first): 1. per-device batch down (4 -> 2 -> 1) with gradient accumulation up, keeping the effective batch;
2. gradient checkpointing (~30% slower);
   GRPO: beta 0 (no reference model), completions half as long, a group half as large (engine.plan.grpo_memory);
3. ZeRO stage up 1 -> 2 -> 3 (only with several processes: on one GPU sharding saves nothing);
4. optimizer offload to CPU (DeepSpeed; on one GPU as ZeRO-2 + offload);
5. parameter offload to CPU (ZeRO-3; large slowdown);
6. a vision-language model's vision tower frozen (LLaMA-Factory's default), then LoRA rank down 64 -> 32 -> 16;
7. 4-bit QLoRA (the offload steps are undone first when 4-bit fits without them, since they are slower).
The first configuration that fits is returned; every candidate is validated with ``engine.spec.schema.parse_spec``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.core.units import memory_size
from engine.machine.kernels import packed_attention_decision, packed_row_tokens, per_sample_refusal
from engine.models.resolve import resolve_model
from engine.plan.messages import message
from engine.plan.planner import MemoryPlan, plan
from engine.spec.schema import RunSpec, SpecError, parse_spec, spec_to_dict

OFFLOAD_STEPS = ("fit.offload_optimizer", "fit.offload_params", "fit.fsdp_offload")


@dataclass
class FitResult:
    spec: RunSpec
    steps: list[str]  # engine.plan.messages Messages
    plan: MemoryPlan
    fits: bool
    tried: list[str] = field(default_factory=list)  # steps skipped because the spec rules refused them

    def to_dict(self) -> dict:
        return {
            "spec": spec_to_dict(self.spec),
            "steps": list(self.steps),
            "plan": self.plan.to_dict(),
            "fits": self.fits,
            "tried": list(self.tried),
        }


def _edit(spec: RunSpec, change: Callable[[dict], None]) -> RunSpec:
    data = spec_to_dict(spec)
    change(data)
    return parse_spec(data)


def _ladder(spec: RunSpec, config: dict | None = None):
    """Yield (description, change(dict)) in order; each change applies on top of the previous ones. First what
    changes no result: per-sample attention where the rows hold several samples under the block-diagonal mask
    (its row x row bias per layer goes), then the batch, checkpointing, sharding, offload, a smaller LoRA rank."""
    row = packed_row_tokens(spec)
    m = spec.model
    if config is None:
        config = resolve_model(m).config or {}
    device = "cpu" if spec.launch.device == "cpu" else "cuda"
    if (
        row
        and m.attn_implementation == "sdpa"
        and not per_sample_refusal("sdpa", config)[0]
        and not packed_attention_decision(m.packed_attention, "sdpa", config, device, row)[0]
    ):
        yield (message("fit.per_sample"), lambda d: d["model"].update(packed_attention="per_sample"))
    t = spec.train
    b, ga = t.per_device_batch_size, t.gradient_accumulation
    while b > 1:
        nb = b // 2 if b % 2 == 0 else 1
        nga = ga * b // nb
        yield (
            message("fit.batch", b=b, nb=nb, ga=ga, nga=nga, effective=spec.effective_batch),
            lambda d, nb=nb, nga=nga: d["train"].update(per_device_batch_size=nb, gradient_accumulation=nga),
        )
        b, ga = nb, nga
    if t.gradient_checkpointing == "off":  # auto already turns it on when the plan does not fit without it
        yield (
            message("fit.checkpointing"),
            lambda d: d["train"].update(gradient_checkpointing="on"),
        )
    if spec.method.stage == "grpo":  # GRPO's own: no reference, shorter completions, a smaller group
        from engine.plan.grpo_memory import ladder

        for key, params, change in ladder(spec):
            yield (message(key, **params), change)
    ln = spec.launch
    multi = spec.world_size > 1
    quant = bool(spec.method.quantization.bits)
    stage = ln.deepspeed.zero_stage if ln.backend == "deepspeed" else 0
    if multi and ln.backend != "fsdp":
        for s in (1, 2, 3):
            if s > stage and not (quant and s == 3):
                yield (
                    message(f"fit.zero{s}", n=spec.world_size),
                    lambda d, s=s: _ds(d, stage=s),
                )
        stage = 2 if quant else 3
    if ln.backend != "fsdp":
        s_off = max(stage, 2)
        yield (
            message("fit.offload_optimizer", stage=s_off),
            lambda d, s=s_off: _ds(d, stage=s, offload_optimizer="cpu"),
        )
        if not quant:
            yield (
                message("fit.offload_params"),
                lambda d: _ds(d, stage=3, offload_optimizer="cpu", offload_param="cpu"),
            )
    elif not ln.fsdp.offload_params:
        yield (
            message("fit.fsdp_offload"),
            lambda d: d["launch"]["fsdp"].update(offload_params=True),
        )
    if isinstance(config.get("vision_config"), dict) and not m.vision.freeze_vision_tower:
        # LLaMA-Factory's default: the tower keeps what it learned in pre-training; its activations and state go
        yield (message("fit.freeze_vision_tower"), lambda d: d["model"]["vision"].update(freeze_vision_tower=True))
    if spec.method.finetuning == "lora":
        r = spec.method.lora.rank
        while r > 16:
            nr = max(16, r // 2)
            yield (message("fit.lora_rank", r=r, nr=nr), lambda d, nr=nr: d["method"]["lora"].update(rank=nr))
            r = nr


def _ds(d: dict, stage: int, offload_optimizer: str = "none", offload_param: str = "none") -> None:
    d["launch"]["backend"] = "deepspeed"
    d["launch"]["deepspeed"].update(zero_stage=stage, offload_optimizer=offload_optimizer, offload_param=offload_param)


def fit(spec: RunSpec, gpu_mem_gib: float, *, model_config: dict | None = None) -> FitResult:
    """The first configuration along the ladder whose planned peak fits ``gpu_mem_gib`` per GPU."""
    kw = {"gpu_mem_gib": gpu_mem_gib, "model_config": model_config}
    current, steps, tried = spec, [], []
    mp = plan(current, **kw)
    if mp.fits:
        return FitResult(current, [], mp, True)
    if spec.train.gradient_checkpointing == "auto":
        # auto decided it for the plan shown (on: it did not fit without it): the ladder starts from that, so each
        # step's figure is below the plan the user saw, and the fitted spec says which it is
        value = "on" if mp.checkpointing else "off"
        spec = current = _edit(spec, lambda d: d["train"].update(gradient_checkpointing=value))
    no_offload, offloaded = spec, False  # every step but the offloads, for the QLoRA step (4-bit may fit without)
    for desc, change in _ladder(spec, model_config):
        try:
            cand = _edit(current, change)
        except SpecError as exc:
            tried.append(message("fit.refused", step=desc, reason=exc.problems[0][1]))
            continue
        mp = plan(cand, **kw)
        current = cand
        steps.append(message("fit.step", step=desc, size=memory_size(mp.total_bytes)))
        if desc.key in OFFLOAD_STEPS:
            offloaded = True
        else:
            try:
                no_offload = _edit(no_offload, change)
            except SpecError:
                pass
        if mp.fits:
            return FitResult(current, steps, mp, True, tried)
    if spec.method.quantization.bits != 4:
        base = no_offload if spec.method.finetuning == "lora" else _to_lora(no_offload)
        for start, keeping in ((base, False), (current, True)):
            try:
                cand = _edit(start, _qlora)
            except SpecError as exc:
                what = message("fit.qlora_short")
                what = message("fit.keeping_offload", step=what) if keeping else what
                tried.append(message("fit.refused", step=what, reason=exc.problems[0][1]))
                continue
            mp = plan(cand, **kw)
            what = message("fit.qlora")
            if spec.method.finetuning != "lora":
                what = message("fit.qlora_switch", finetuning=spec.method.finetuning, rank=cand.method.lora.rank)
            if keeping:
                what = message("fit.keeping_offload", step=what)
            elif offloaded:  # 4-bit fits without the offloads: they are undone
                what = message("fit.instead_of_offload", step=what)
            if mp.fits:
                steps.append(message("fit.step", step=what, size=memory_size(mp.total_bytes)))
                return FitResult(cand, steps, mp, True, tried)
            if keeping and mp.total_bytes < plan(current, **kw).total_bytes:  # nothing fits: the smallest is shown
                steps.append(message("fit.step", step=what, size=memory_size(mp.total_bytes)))
                current = cand
    return FitResult(current, steps, plan(current, **kw), False, tried)


def _to_lora(spec: RunSpec) -> RunSpec:
    return _edit(spec, lambda d: d["method"].update(finetuning="lora"))


def _qlora(d: dict) -> None:
    d["method"]["quantization"].update(bits=4, quant_type="nf4", double_quant=True)
    ln = d["launch"]
    if ln["backend"] == "deepspeed" and ln["deepspeed"]["zero_stage"] == 3:
        ln["deepspeed"].update(zero_stage=2, offload_param="none")
    if ln["backend"] == "fsdp" and ln["fsdp"]["offload_params"]:
        ln["fsdp"]["offload_params"] = False
