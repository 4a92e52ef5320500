"""The Trainer a run trains with, and its arguments, by stage: transformers' Trainer (sft, pt; sft's dft / asft /
eaft losses through engine.trainer.sft_losses), TRL's DPOTrainer (dpo; ORPO / SimPO through
engine.trainer.pref_losses), KTOTrainer (kto), RewardTrainer (rm) or GRPOTrainer (grpo, engine.trainer.grpo).

Heavy: transformers, trl and torch inside functions. The arguments are TrainingArguments or the stage's TRL config
from the spec, ``train.extra_args`` on top; the optimizer (torch's fused AdamW when it can, the ones
engine.trainer.optim builds as a factory) and gradient checkpointing under the installed transformers' names; logits
only at trained positions when the model's forward can take them. engine.trainer.train calls ``training_arguments``,
``use_trained_logits`` and ``build_trainer`` once the data and the model are ready.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from engine.machine.kernels import fp8_device_refusal, liger_decision
from engine.machine.messages import message as machine_message
from engine.models.resolve import resolve_model
from engine.spec.schema import RunSpec, SpecError
from engine.watch import trackers


def training_arguments(
    spec: RunSpec, out: Path, run_dir: Path, device: str, precision: str, *, has_eval: bool, model=None
):
    """The Trainer's arguments for the spec; ``model`` (when loaded) names the linear layers GaLore / APOLLO's 'all'
    targets. With ``train.fp8`` the Accelerator the Trainer builds gets mixed_precision fp8 (``fp8_accelerate``)."""
    targs = _stage_arguments(spec, out, run_dir, device, precision, has_eval=has_eval, model=model)
    for key in FP8_ENV:  # accelerate's prepare() converts the model by ACCELERATE_FP8_BACKEND even with FP8 off: an
        os.environ.pop(key, None)  # earlier FP8 run in this process (in-process tests) must not leave it behind
    if spec.train.fp8:
        fp8_device_check(device)
        os.environ.update(fp8_accelerate_env(spec))
        targs.mixed_precision = "fp8"  # read by Trainer._build_accelerator_args; bf16 stays on for the rest
    return targs


FP8_ENV = ("ACCELERATE_FP8_BACKEND", "ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER")


def fp8_accelerate_env(spec: RunSpec) -> dict[str, str]:
    """accelerate's FP8 settings for ``train.fp8_backend``, as the variables its Accelerator reads when it makes the
    recipe itself (``accelerate launch --fp8_backend``): AORecipeKwargs (torchao) or TERecipeKwargs (Transformer
    Engine); auto leaves the choice to accelerate (torchao where installed, else Transformer Engine). Float8
    all-gather is off: it is an FSDP2 hook and Studio's FSDP is version 1."""
    env = {"ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER": "false"}
    backend = {"torchao": "AO", "te": "TE"}.get(spec.train.fp8_backend)
    if backend:
        env["ACCELERATE_FP8_BACKEND"] = backend
    return env


def fp8_in_use(trainer) -> str:
    """What the Trainer's Accelerator trains the linear layers with, for ``run_started``: the FP8 backend it took
    (torchao, te), or what it runs instead ("off: bf16") where it turned FP8 down."""
    accelerator = trainer.accelerator
    if accelerator.state.mixed_precision != "fp8":
        return f"off: {accelerator.state.mixed_precision}"
    return {"AO": "torchao", "TE": "te"}.get(accelerator.fp8_backend.value, accelerator.fp8_backend.value)


def fp8_device_check(device: str) -> None:
    """The launch's FP8 rule (engine.machine.kernels.fp8_device_refusal) on the GPU this process trains on, as torch
    sees it: below compute capability 8.9 accelerate would quietly train in fp16 instead."""
    import torch

    gpus = []
    if device == "cuda":
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        gpus = [SimpleNamespace(name=torch.cuda.get_device_name(index), compute_capability=f"{major}.{minor}")]
    refusal = fp8_device_refusal(device, gpus)
    if refusal:
        raise SpecError([("train.fp8", machine_message(refusal[0], **refusal[1]))])


def _stage_arguments(
    spec: RunSpec, out: Path, run_dir: Path, device: str, precision: str, *, has_eval: bool, model=None
):
    from transformers import TrainingArguments

    from engine.spec.train_group import LOW_RANK_OPTIMIZERS
    from engine.trainer.optim import low_rank_settings

    t = spec.train
    report = [r for r in spec.output.report_to if r != "none"]
    trackers.apply(os.environ, trackers.tracker_env(report, out, spec.output.run_name or run_dir.name))
    kwargs = dict(
        output_dir=str(out / "checkpoints"),
        num_train_epochs=t.num_epochs,
        max_steps=t.max_steps,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler,
        warmup_steps=t.warmup_steps if t.warmup_steps > 0 else t.warmup_ratio,
        weight_decay=t.weight_decay,
        optim=optimizer_name(spec),
        per_device_train_batch_size=t.per_device_batch_size,
        per_device_eval_batch_size=t.per_device_eval_batch_size or t.per_device_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation,
        max_grad_norm=t.max_grad_norm if t.max_grad_norm > 0 else None,
        # the Trainer's filter asks isnan / isinf of every batch's loss (on a GPU two waits for the device per batch,
        # bench/step_overhead.py) to log the running mean in its place; the health rules read a non-finite loss
        # as it is instead
        logging_nan_inf_filter=False,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        **checkpointing_args(t.gradient_checkpointing == "on"),  # resolved from auto in train()
        use_liger_kernel=liger_decision(t.liger_kernel, device, _model_type(spec), t.loss)[0],
        seed=t.seed,
        data_seed=t.seed,
        logging_steps=t.logging_steps,
        save_strategy=t.save_strategy,
        save_steps=t.save_steps,
        save_only_model=t.save_only_model,
        eval_strategy=t.eval_strategy if has_eval else "no",
        eval_steps=t.eval_steps if has_eval else None,
        save_total_limit=t.save_total_limit,
        report_to=report or "none",
        use_cpu=device == "cpu",
        include_num_input_tokens_seen=token_count(spec),
        neftune_noise_alpha=t.neftune_noise_alpha,
        ddp_timeout=spec.launch.ddp_timeout,
        remove_unused_columns=False,
        disable_tqdm=True,
        ddp_find_unused_parameters=False if spec.launch.backend == "ddp" else None,
        dataloader_num_workers=spec.data.dataloader_workers,
        # transformers 5 replaced group_by_length=True with this; the rows carry a "length" column
        # (engine.trainer.dataset)
        train_sampling_strategy="group_by_length" if spec.data.group_by_length else "random",
        label_names=["labels"],
        run_name=spec.output.run_name or run_dir.name,
    )
    if t.optimizer in LOW_RANK_OPTIMIZERS:  # GaLore / APOLLO: transformers' own optimizers, set by these three
        kwargs.update(low_rank_settings(spec, model))
    # More TrainingArguments as the user gave them (validated against the installed transformers' fields by the
    # spec, never one a field above sets: engine.spec.hf_args.STUDIO_SETS)
    kwargs.update(t.extra_args)
    if spec.launch.backend == "deepspeed":
        kwargs["deepspeed"] = str(run_dir / "ds_config.json")
    if spec.launch.backend in ("ddp", "deepspeed") and device == "cpu":
        # gloo on CPU, also under DeepSpeed (which takes over this process group): its CPU accelerator would pick
        # oneCCL where oneccl_bindings_for_pytorch is installed, and accelerate MPI where torch has it
        kwargs["ddp_backend"] = "gloo"
    stage = spec.method.stage
    if stage in ("dpo", "kto", "rm", "grpo"):
        kwargs.pop("label_names")  # TRL's trainers read their own columns
    if stage == "grpo":
        from engine.trainer.grpo import grpo_config

        return grpo_config(spec, kwargs)
    if stage == "dpo" and spec.method.dpo.loss_type in ("orpo", "simpo"):  # engine.trainer.pref_losses
        from engine.trainer import pref_losses

        return pref_losses.config(spec, kwargs)
    if stage == "dpo":
        from trl import DPOConfig

        # TRL's padding-free DPO flattens the pairs and relies on flash_attention_2's variable-length kernels
        flat = spec.data.padding_free != "off" and spec.model.attn_implementation == "flash_attention_2"
        return DPOConfig(
            beta=spec.method.dpo.beta,
            loss_type=[spec.method.dpo.loss_type],
            max_length=spec.data.cutoff_len,
            padding_free=flat,
            **kwargs,
        )
    if stage == "kto":
        from trl import KTOConfig

        # KTO's KL term pairs each prompt with the next row's answer within a device batch: the batches must keep
        # the dataset's order (TRL refuses any other sampler); the rows were shuffled when the data was split
        kwargs["train_sampling_strategy"] = "sequential"
        k = spec.method.kto
        return KTOConfig(
            beta=k.beta,
            desirable_weight=k.desirable_weight,
            undesirable_weight=k.undesirable_weight,
            max_length=spec.data.cutoff_len,
            **kwargs,
        )
    if stage == "rm":
        from trl import RewardConfig

        return RewardConfig(max_length=spec.data.cutoff_len, **kwargs)
    return TrainingArguments(**kwargs)


def token_count(spec: RunSpec) -> str:
    """``include_num_input_tokens_seen`` for the run: ``train.count_input_tokens``, except that non_padding on
    padding-free batches (engine.trainer.collators.FlatteningCollator: no pad token in them) counts every token.
    transformers counts a batch without attention_mask as input_ids != the pad id, which also drops every eos of a
    tokenizer whose pad token is its eos (SmolLM2's <|im_end|>: ~5% of the identity rows' tokens), so the engine's
    tokens/s and token total came out lower than a padded batch's count of the same samples."""
    from engine.trainer.collators import padding_free

    wanted = spec.train.count_input_tokens
    return "all" if wanted == "non_padding" and padding_free(spec) else wanted


def use_trained_logits(spec: RunSpec, model, targs) -> tuple[bool, str]:
    """(compute logits only at trained positions, why) for this run: sft with train.trained_logits_only, a model
    whose forward takes a position mask, and no Liger kernels (their fused linear cross-entropy already never
    materialises the logits, and takes no mask)."""
    from engine.trainer.collators import trained_logits_supported

    if not spec.train.trained_logits_only:
        return False, "train.trained_logits_only is off"
    if spec.method.stage != "sft":
        return False, f"stage {spec.method.stage} computes its own loss"
    if getattr(targs, "use_liger_kernel", False):
        return False, "Liger kernels fuse the output layer and the loss"
    return trained_logits_supported(model)


def optimizer_name(spec: RunSpec) -> str:
    """The Trainer optimizer for spec.train.optimizer. adamw_torch runs as torch's fused AdamW (one kernel for all
    parameters; the Trainer's own default since torch 2.8): on the demo LoRA run the per-parameter loop cost ~4 ms
    of a ~60 ms CPU step. DeepSpeed keeps the plain one (it wraps or replaces the optimizer itself)."""
    import torch

    name = spec.train.optimizer
    if name in ("adam_mini", "muon", "badam"):  # built by engine.trainer.optim; the Trainer's optim is then unused
        name = "adamw_torch"
    fused_ok = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 8)
    if name == "adamw_torch" and fused_ok and spec.launch.backend != "deepspeed":
        return "adamw_torch_fused"
    return name


def build_trainer(spec: RunSpec, model, tokenizer, data, targs, callbacks):
    """The Trainer (sft, pt) or TRL's DPOTrainer / KTOTrainer / RewardTrainer, with the optimizer
    engine.trainer.optim builds when the spec asks for one the Trainer has no ``optim`` name for (LoRA+, Adam-mini,
    Muon, BAdam)."""
    from engine.trainer.optim import optimizer_factory

    without_deepspeed_probe(spec)
    trainer = _make_trainer(spec, model, tokenizer, data, targs, callbacks)
    factory = optimizer_factory(spec, targs)
    if factory is not None:
        trainer.optimizer_cls_and_kwargs = factory  # read by Trainer.create_optimizer
    if spec.train.optimizer == "badam":  # as BAdam's authors and LLaMA-Factory wire it into the Trainer
        from types import MethodType

        from badam import BAdamCallback, clip_grad_norm_old_version

        trainer.accelerator.clip_grad_norm_ = MethodType(clip_grad_norm_old_version, trainer.accelerator)
        trainer.add_callback(BAdamCallback)
    return trainer


def without_deepspeed_probe(spec: RunSpec) -> None:
    """A run that does not train with DeepSpeed does not import it. accelerate's ``extract_model_from_parallel``
    (behind the Trainer's ``unwrap_model``, called from the Trainer's first lines on) imports DeepSpeed whenever it
    is installed, only to ask whether the model is a ``DeepSpeedEngine``, which such a run's model never is; the
    import took seconds of every run's start (more than the rest of accelerate and TRL together). Said unavailable
    to that function's module alone; a DeepSpeed run gets accelerate's own check back (a process that trains more
    than once, as the in-process tests do, is not left with the first run's answer)."""
    from accelerate.utils import imports, other

    if hasattr(other, "is_deepspeed_available"):  # a later accelerate without the probe: nothing to do
        deepspeed = spec.launch.backend == "deepspeed"
        other.is_deepspeed_available = imports.is_deepspeed_available if deepspeed else (lambda: False)


def _make_trainer(spec: RunSpec, model, tokenizer, data, targs, callbacks):
    stage = spec.method.stage
    if stage == "grpo":
        from engine.trainer.grpo import make_trainer

        return make_trainer(spec, model, tokenizer, data, targs, callbacks)
    if stage in ("dpo", "kto", "rm"):
        import trl

        trainer_class = {"dpo": trl.DPOTrainer, "kto": trl.KTOTrainer, "rm": trl.RewardTrainer}[stage]
        if stage == "dpo" and spec.method.dpo.loss_type in ("orpo", "simpo"):
            from engine.trainer import pref_losses

            trainer_class = pref_losses.trainer_class(spec)
        trainer = trainer_class(
            model=model,
            args=targs,
            train_dataset=data.train_dataset,
            eval_dataset=data.eval_dataset,
            data_collator=data.data_collator,  # None (TRL's own) but for a vision-language dpo run's images
            processing_class=tokenizer,  # a vision-language model's processor: TRL's vision path
            callbacks=callbacks,
        )
        _count_filtered(spec, trainer, data)
        return trainer
    from transformers import Trainer

    t = spec.train
    token_loss = {}
    if stage == "sft" and t.loss != "cross_entropy":  # dft / asft / eaft (engine.trainer.sft_losses)
        from engine.trainer import sft_losses

        Trainer = sft_losses.trainer_class()  # noqa: N806
        token_loss = {"loss": t.loss, "asft_alpha": t.asft_alpha, "eaft_alpha": t.eaft_alpha}
    return Trainer(
        model=model,
        args=targs,
        train_dataset=data.train_dataset,
        eval_dataset=data.eval_dataset,
        data_collator=data.data_collator,
        processing_class=tokenizer,
        callbacks=callbacks,
        **token_loss,
    )


def _count_filtered(spec: RunSpec, trainer, data) -> None:
    """TRL drops rows it cannot train within ``max_length`` (rm: a pair longer than the cutoff; kto: a prompt that
    fills it): say how many, and refuse a run that has none left, naming the cutoff."""
    left, given = len(trainer.train_dataset), len(data.train_dataset)
    if left == given:
        return
    print(
        f"data: {given - left} of {given} training rows dropped by TRL, longer than data.cutoff_len "
        f"({spec.data.cutoff_len} tokens)",
        flush=True,
    )
    if left == 0:
        why = f"every training row is longer than data.cutoff_len ({spec.data.cutoff_len} tokens): raise it"
        raise SpecError([("data.cutoff_len", why)])


def _model_type(spec: RunSpec) -> str | None:
    cfg = resolve_model(spec.model).config or {}
    return cfg.get("model_type") or (cfg.get("text_config") or {}).get("model_type")


def checkpointing_args(on: bool) -> dict:
    """Gradient checkpointing for TrainingArguments, under the name this transformers takes: 5.x renamed
    ``gradient_checkpointing*`` to ``activation_checkpointing*`` and warns on the old names in every run's log."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    stem = "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"
    return {stem: on, f"{stem}_kwargs": {"use_reentrant": False} if on else None}
