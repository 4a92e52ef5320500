"""The trainer subprocess: ``python -m engine.trainer.train SPEC.yaml --run-dir RUN_DIR``, itself for one process,
under ``accelerate launch ...`` for several (engine.runs.launch).

Heavy: torch, transformers, peft, trl, datasets. Validates the spec (with its files) again, prepares the data before
any model is loaded, trains with the stage's Trainer (engine.trainer.trainers: transformers Trainer for sft, pt; TRL's
DPOTrainer (dpo), KTOTrainer (kto), RewardTrainer (rm: a sequence-classification model, one score per sequence) or
GRPOTrainer (grpo, engine.trainer.grpo)), resumed from ``train.resume_from`` (``last``: the newest loadable
checkpoint), saves the adapter or model, and turns any exception into a classified ``failed`` event and a non-zero
exit. SIGTERM saves a checkpoint and exits 0 with a ``stopped`` event.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import logging
import os
import platform
import sys
import time
import traceback
import warnings
from pathlib import Path

from engine.core import acting
from engine.core.events import append_event
from engine.core.messages import to_json
from engine.machine.kernels import packed_attention_decision, packed_row_tokens
from engine.models.resolve import resolve_model
from engine.runs import checkpoints as checkpoint_folders
from engine.runs import fingerprints
from engine.runs import outputs as checkpoint_outputs
from engine.runs.messages import message as run_message
from engine.spec.schema import RunSpec, SpecError, load_spec
from engine.trainer import attention, lean
from engine.trainer.trainers import build_trainer, fp8_in_use, training_arguments, use_trained_logits
from engine.watch.health import STOP_FILE, stop_reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.trainer.train")
    parser.add_argument("spec", help="run spec YAML")
    parser.add_argument("--run-dir", required=True, help="run folder: events.jsonl, record.json, outputs")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    events = run_dir / "events.jsonl"
    # peft and TRL read transformers' deprecated ``is_gradient_checkpointing`` themselves: nothing a user can act on,
    # so it stays out of train.log (where it read as if something were wrong with the run)
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    # bitsandbytes 0.50 on a CPU with AVX512-BF16 tries to fetch a faster 4-bit kernel from the hub through the
    # `kernels` package and, offline or without it, warns "pip install kernels" at import; its own CPU path is used
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
    rank = int(os.environ.get("RANK", "0"))
    try:
        acting.honour_grant(run_dir)  # an output folder chosen at the shell (engine.core.acting)
        spec = load_spec(args.spec)
        lean.without_quantizers(lean.needs_bitsandbytes(spec))  # only as `python -m` (own_process)
        code = train(spec, run_dir, events)
        release_process_group()
        return code
    except BaseException as exc:  # noqa: BLE001 - every failure must become an event
        if isinstance(exc, SystemExit) and not exc.code:
            raise
        cause = classify(exc)
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        print(tb, file=sys.stderr, flush=True)
        append_event(
            events,
            "failed",
            None,
            cause=cause,
            error=f"{type(exc).__name__}: {exc}"[:4000],
            traceback=tb[-6000:],
            rank=rank,
        )
        return 1


def classify(exc: BaseException) -> str:
    """Name the cause a user acts on: out of memory, communication, data, config, disk (full, I/O error), or other."""
    text = f"{type(exc).__name__}: {exc}".lower()
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        return "disk"
    if "no space left on device" in text:  # wrapped by a library (safetensors, torch.save)
        return "disk"
    if isinstance(exc, SpecError) or "spec" in type(exc).__name__.lower():
        return "config"
    if "out of memory" in text or "outofmemory" in text or isinstance(exc, MemoryError):
        return "oom"
    if any(
        k in text
        for k in (
            "nccl",
            "gloo",
            "connection reset",
            "timed out",
            "distnetworkerror",
            "c10d",
            "broken pipe",
            "process group",
        )
    ):
        return "communication"
    if type(exc).__name__ in ("DataError", "DatasetGenerationError") or "dataset" in text:
        return "data"
    if isinstance(exc, KeyboardInterrupt):
        return "killed"
    return "other"


def resolve_device_and_precision(spec: RunSpec) -> tuple[str, str]:
    """What the launcher resolved (STUDIO_DEVICE / STUDIO_PRECISION, from engine.runs.launch), so the trainer never
    second-guesses it; resolved here from torch only when started without the launcher (in-process tests)."""
    launched = os.environ.get("STUDIO_DEVICE"), os.environ.get("STUDIO_PRECISION")
    if all(launched):
        return launched[0], launched[1]
    import torch

    device = spec.launch.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() and os.environ.get("STUDIO_FORCE_CPU") != "1" else "cpu"
    precision = spec.train.precision
    if precision == "auto":
        if device == "cpu":
            precision = "fp32"
        else:
            precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return device, precision


def train(spec: RunSpec, run_dir: Path, events: Path) -> int:
    import torch
    from transformers import set_seed

    from engine.trainer import model as model_lib
    from engine.trainer.callbacks import EventsCallback, GracefulStop, HealthCallback, TokensSeen
    from engine.trainer.dataset import build_train_data

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device, precision = resolve_device_and_precision(spec)
    if device == "cpu":
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
    out = Path(spec.output.output_dir).expanduser() if spec.output.output_dir else run_dir
    out.mkdir(parents=True, exist_ok=True)
    stopper = GracefulStop()
    set_seed(spec.train.seed)
    lean.without_shm_comm(spec.launch.backend, device)  # before DeepSpeed's comm backend starts (engine.trainer.lean)
    if spec.launch.backend == "deepspeed" and spec.launch.deepspeed.zero_stage == 3 and device == "cpu":
        # ZeRO-3 partitions inside from_pretrained; it needs the process group before the model loads.
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")

    ckpt_mode, ckpt_reason = resolve_checkpointing(spec, device)
    from engine.trainer import vision

    where = model_lib.model_location(spec)
    vlm = vision.wanted(spec, where)  # a vision-language model: its processor, its rows' images (trainer.vision)
    tokenizer = vision.load_processor(spec, where) if vlm else model_lib.load_tokenizer(spec)
    log = lambda msg: print(msg, flush=True) if rank == 0 else None  # noqa: E731
    data_builder = build_train_data
    if spec.method.stage == "grpo":  # prompts for TRL's GRPOTrainer (engine.trainer.grpo)
        from engine.trainer.grpo import build_data as data_builder
    if vlm:  # images with the processor: sft's encoded rows, dpo's pairs for TRL's vision collator
        from engine.trainer import vision_dpo

        data_builder = vision_dpo.build_data if spec.method.stage == "dpo" else vision.build_data
    data = data_builder(spec, tokenizer, log=log)
    if rank == 0:
        append_event(events, "data_ready", 0, **data.stats)
        write_record(spec, run_dir, tokenizer, device, precision)
        fingerprints.record_estimate(spec, run_dir, device)
    row_tokens = packed_row_tokens(spec) if data.stats.get("padding_free") or spec.data.packing else 0
    per_sample, attention_reason = choose_attention(spec, device, row_tokens)
    model = model_lib.load_model(
        spec,
        device=device,
        precision=precision,
        attn_implementation=attention.NAME if per_sample else None,
        vision=vlm,
    )
    trainable, total = model_lib.count_parameters(model)

    if spec.method.finetuning == "lora" and spec.method.lora.pissa_convert and rank == 0:
        model_lib.save_pissa_init(model, out)  # before any step: the conversion subtracts this start
    targs = training_arguments(
        spec, out, run_dir, device, precision, has_eval=data.eval_dataset is not None, model=model
    )
    if per_sample and data.data_collator is not None:  # each batch's spans found on the host (trainer.attention)
        data.data_collator = attention.SampleSpansCollator(data.data_collator)
    trained_logits, trained_logits_reason = use_trained_logits(spec, model, targs)
    if vlm:
        trained_logits, trained_logits_reason = False, "a vision-language model's forward takes no position mask"
    if trained_logits:
        from engine.trainer.collators import TrainedLogitsCollator

        data.data_collator = TrainedLogitsCollator(data.data_collator)
    callback = EventsCallback(events, tokens_logged=spec.method.stage == "grpo")
    # before the first checkpoint, its size for the disk rule: trained weights and two Adam moments in fp32, plus the
    # whole model when it is not an adapter
    estimate = trainable * 12 + (0 if spec.method.adapter else total * 2)
    health = HealthCallback(
        spec.health, events, callback, checkpoint_estimate=estimate, surrogate_loss=spec.method.stage == "grpo"
    )
    trainer = build_trainer(spec, model, tokenizer, data, targs, [callback, health, stopper])
    trainer.add_callback(TokensSeen(trainer))  # after the stopper: it reads the count at a stop's step too
    if any(r != "none" for r in spec.output.report_to):  # after the trackers' own callbacks, which start their runs
        from engine.trainer.tracker_config import SpecToTrackers

        trainer.add_callback(SpecToTrackers(spec, trainer))
    total_steps = trainer.state.max_steps or _planned_steps(spec, len(data.train_dataset), world)
    if rank == 0:
        append_event(
            events,
            "run_started",
            0,
            world_size=world,
            backend=spec.launch.backend,
            device=device,
            precision=precision,
            total_steps=total_steps,
            num_train_samples=len(data.train_dataset),
            trainable_params=trainable,
            total_params=total,
            seed=spec.train.seed,
            pid=os.getpid(),
            output_dir=str(out),
            gradient_checkpointing=spec.train.gradient_checkpointing == "on",
            gradient_checkpointing_mode=ckpt_mode,
            gradient_checkpointing_reason=ckpt_reason,
            trained_logits_only=trained_logits,
            trained_logits_reason=trained_logits_reason,
            per_sample_attention=per_sample,
            per_sample_attention_reason=attention_reason,
            **({"fp8": fp8_in_use(trainer)} if spec.train.fp8 else {}),
            **({"vision": True, "packing": False, "packing_reason": vision.NO_PACKING} if vlm else {}),
        )
        _write_plan(spec, run_dir)
    resume = resolve_resume(spec, out)
    t0, cpu0 = time.time(), time.process_time()
    result = trainer.train(resume_from_checkpoint=resume)
    runtime, cpu_time = time.time() - t0, time.process_time() - cpu0
    # a run a rule stopped with weights no longer finite keeps its last good checkpoint and writes no final weights
    broken = health.stopping and not health.saved
    final_dir = None if broken else save_final(spec, trainer, tokenizer, out)
    if rank == 0:
        if health.stopping or (stopper.requested and (run_dir / STOP_FILE).is_file()):
            append_event(events, "stopped", trainer.state.global_step, **health_stop(health, trainer, out, run_dir))
        elif stopper.requested:
            step = trainer.state.global_step
            ckpt = out / "checkpoints" / f"checkpoint-{step}"
            saved = str(ckpt) if ckpt.exists() else None
            # The page and the CLI say why it stopped and where the checkpoint is, not the signal's name.
            reason = (
                run_message("runs.user_stop_saved", step=step, checkpoint=saved)
                if saved
                else run_message("runs.user_stop_unsaved", step=step)
            )
            append_event(
                events,
                "stopped",
                step,
                reason=str(reason),
                reason_msg=to_json(reason),
                signal="SIGTERM",
                checkpoint=saved,
            )
        else:
            append_event(
                events,
                "finished",
                trainer.state.global_step,
                train_loss=result.training_loss,
                runtime_seconds=round(runtime, 2),
                memory=callback.peak_memory or None,
                metrics=result.metrics,
                **{("adapter_dir" if spec.method.adapter else "model_dir"): str(final_dir)},
            )
            fingerprints.record_duration(run_dir, runtime, trainer.state.global_step, cpu_time)
    close_process_group()
    return 0


def health_stop(health, trainer, out: Path, run_dir: Path) -> dict:
    """The stopped event of a run a health rule stopped: by the trainer's own rules (``health``), or by the wrapper's
    (no progress, the GPUs), which wrote ``STOP_FILE`` before its SIGTERM."""
    from engine.core.messages import from_json

    step = trainer.state.global_step
    if health.stopping:
        alert = health.stop_alert
        what, rule, at = (alert.reason, alert.rule, alert.step) if alert else ("", "", step)
        saved = health.saved
    else:
        try:
            told = json.loads((run_dir / STOP_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            told = {}
        what, rule, at, saved = from_json(told.get("reason_msg", told.get("reason", ""))), told.get("rule"), step, True
    kept = None
    for ckpt in checkpoint_folders.newest_first(out / "checkpoints"):
        if checkpoint_folders.complete(ckpt) and (saved or checkpoint_folders.step(ckpt) < step):
            kept = ckpt
            break
    saved = saved and kept is not None and checkpoint_folders.step(kept) == step
    reason = stop_reason(what, at, kept.name if kept else None, saved)
    return {
        "reason": str(reason),
        "reason_msg": to_json(reason),
        "health_rule": rule,
        "checkpoint": str(kept) if kept else None,
        "weights_finite": not (health.stopping and not health.saved),
    }


_WORLD: list = []  # the process group, held past train()'s return (release_process_group)


def close_process_group() -> None:
    """Leave the process group together and tear it down before the interpreter exits. Left to interpreter
    shutdown, gloo's threads can be destroyed mid-use ("terminate called without an active exception", SIGABRT)
    and a run that finished reports a failed rank. The group object itself is kept until release_process_group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        _WORLD.append(dist.group.WORLD)
        dist.destroy_process_group()


def release_process_group() -> None:
    """Let go of the process group once train()'s frame is gone: its model, DDP's reducer and the trainer's cycles
    (collected here while the group is still held). Released by the reducer instead, the group's destructor ran
    holding the GIL and joined gloo's worker threads, while a worker still freeing a finished collective's tensors
    waited for that GIL: both waited forever (a CI rank hung after its run had stopped; pytorch/pytorch#56297).
    Dropped here, through the group's Python object, whose destructor lets go of the GIL first."""
    if _WORLD:
        import gc

        gc.collect()
        _WORLD.clear()


def resolve_resume(spec: RunSpec, out: Path) -> str | None:
    """'last' -> the newest loadable checkpoint in the output folder (a corrupt newest one falls back, loudly)."""
    want = spec.train.resume_from
    if not want:
        return None
    if want != "last":
        return want  # its existence is a spec context rule, checked before launch and again at load
    ckpts = sorted((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]), reverse=True)
    for ckpt in ckpts:
        if checkpoint_ok(ckpt):
            return str(ckpt)
        print(f"[studio] checkpoint {ckpt} is incomplete or corrupt; falling back to an older one", flush=True)
    if ckpts:
        raise SpecError([("train.resume_from", f"no loadable checkpoint in {out / 'checkpoints'}")])
    print("[studio] resume_from=last but no checkpoint yet: starting from scratch", flush=True)
    return None


def checkpoint_ok(ckpt: Path) -> bool:
    """A checkpoint is loadable when it is complete (engine.runs.checkpoints: trainer state, weights as long as their
    headers say, optimizer) and its safetensors files open."""
    from engine.runs.checkpoints import complete

    if not complete(ckpt):
        return False
    try:
        from safetensors import safe_open

        for w in ckpt.glob("*.safetensors"):
            with safe_open(str(w), "pt") as fh:
                list(fh.keys())
        return True
    except Exception:  # any unreadable part makes the checkpoint unusable
        return False


def save_final(spec: RunSpec, trainer, tokenizer, out: Path) -> Path:
    target = checkpoint_outputs.final_dir(out, adapter=spec.method.adapter, layout=spec.output.layout)
    if spec.method.finetuning == "lora" and spec.method.lora.pissa_convert:
        from engine.trainer.model import save_pissa_as_lora

        save_pissa_as_lora(trainer, target, out)
    else:
        trainer.save_model(str(target))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(target))
    return target


def write_record(spec: RunSpec, run_dir: Path, tokenizer, device: str, precision: str) -> None:
    """The replayable record: versions, hardware, dataset and tokenizer hashes, seed, command."""
    import torch

    record = {
        "spec_file": "spec.yaml",
        "versions": fingerprints.package_versions(),
        "python": platform.python_version(),
        "hardware": {
            "device": device,
            "precision": precision,
            "cuda": torch.version.cuda,
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if device == "cuda"
            else [],
            "platform": platform.platform(),
        },
        "dataset_hashes": fingerprints.dataset_hashes(spec),
        "tokenizer_hash": fingerprints.tokenizer_hash(spec.model.name_or_path),
        "template": spec.data.template,
        "chat_template_hash": hashlib.sha256((getattr(tokenizer, "chat_template", None) or "").encode()).hexdigest(),
        "seed": spec.train.seed,
        "command": sys.argv,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
    }
    launch = run_dir / "launch.json"
    if launch.exists():
        record["launch"] = json.loads(launch.read_text())
    (run_dir / "record.json").write_text(json.dumps(record, indent=2))


def _planned_steps(spec: RunSpec, n: int, world: int) -> int:
    if spec.train.max_steps > 0:
        return spec.train.max_steps
    per_step = spec.train.per_device_batch_size * spec.train.gradient_accumulation * world
    return max(1, int(spec.train.num_epochs * max(1, -(-n // per_step))))


def choose_attention(spec: RunSpec, device: str, row_tokens: int) -> tuple[bool, str]:
    """Per-sample sdpa for rows that hold several samples (engine.machine.kernels.packed_attention_decision),
    registered when chosen. Returns (per sample, why)."""
    config = resolve_model(spec.model).config or {}
    per_sample, reason = packed_attention_decision(
        spec.model.packed_attention, spec.model.attn_implementation, config, device, row_tokens
    )
    if per_sample:
        attention.register()
    return per_sample, reason


def resolve_checkpointing(spec: RunSpec, device: str) -> tuple[str, str]:
    """Gradient checkpointing ``auto`` becomes on or off from the memory plan for this run's device
    (``engine.plan.planner.plan``, the same decision the plan panel shows); the spec is set to it in place.
    Returns (the mode the spec asked for, why)."""
    mode = spec.train.gradient_checkpointing
    try:
        from engine.machine.hardware import detect
        from engine.plan import planner as plan_lib

        planned = spec.model_copy(deep=True)
        planned.launch.device = device
        mp = plan_lib.plan(planned, hardware=detect())
        decided, reason = bool(mp.checkpointing), str(mp.checkpointing_reason)
    except Exception as exc:  # no plan (an architecture the planner cannot read): checkpoint unless told not to
        decided = mode != "off"
        reason = f"memory plan unavailable ({exc}): {'on' if decided else 'off'}"
    spec.train.gradient_checkpointing = "on" if decided else "off"
    return mode, reason


def _write_plan(spec: RunSpec, run_dir: Path) -> None:
    """The memory prediction beside the run, for predicted-vs-measured (engine.plan.planner, when available)."""
    try:
        from engine.machine.hardware import detect
        from engine.plan import planner as plan_lib

        (run_dir / "plan.json").write_text(json.dumps(plan_lib.plan(spec, hardware=detect()).to_dict(), indent=2))
    except Exception as exc:  # the plan is advisory: never fail a run over it
        print(f"[studio] memory plan unavailable: {exc}", flush=True)


if __name__ == "__main__":
    lean.own_process()  # what this job does not use stays unimported (engine.trainer.lean)
    sys.exit(main())
