"""The run spec's ``train`` group: the training loop's settings - epochs and steps, learning rate and schedule,
optimizer (with GaLore / APOLLO's ``low_rank`` and BAdam's ``badam`` options), batch, precision, checkpointing,
logging, saving and evaluating, and TrainingArguments passed through. Light: pydantic and engine.spec.groups only.
Assembled into ``RunSpec`` by ``engine.spec.schema``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from engine.spec.groups import _meta, _Spec

LOW_RANK_OPTIMIZERS = ("galore_adamw", "galore_adamw_8bit", "galore_adafactor", "apollo_adamw")


class LowRankOptimSpec(_Spec):
    """GaLore / APOLLO: settings of transformers' low-rank optimizers (``optim_target_modules``, ``optim_args``)."""

    targets: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        description="GaLore / APOLLO: linear modules whose gradients are projected (e.g. q_proj, v_proj), or 'all' "
        "for every linear layer of the decoder",
        json_schema_extra=_meta("Projected modules"),
    )
    rank: int = Field(
        16,
        ge=1,
        le=65536,
        description="GaLore / APOLLO: rank of the projected gradients",
        json_schema_extra=_meta("Projection rank"),
    )
    update_interval: int = Field(
        200,
        ge=1,
        le=10_000_000,
        description="GaLore / APOLLO: steps between updates of the projection",
        json_schema_extra=_meta("Projection update interval"),
    )
    scale: float | None = Field(
        None,
        gt=0,
        le=1e4,
        description="GaLore / APOLLO: scale of the projected update (empty: 2 for GaLore, 32 for APOLLO, "
        "LLaMA-Factory's defaults)",
        json_schema_extra=_meta("Projection scale"),
    )
    proj_type: Literal["std", "reverse_std", "right", "left", "full"] = Field(
        "std",
        description="GaLore / APOLLO: which side is projected (APOLLO takes std, right or left)",
        json_schema_extra=_meta("Projection type"),
    )
    apollo_proj: Literal["random", "svd"] = Field(
        "random",
        description="APOLLO: random or SVD projection",
        json_schema_extra=_meta("APOLLO projection"),
    )
    apollo_scale_type: Literal["channel", "tensor"] = Field(
        "channel",
        description="APOLLO: scale per channel or per tensor",
        json_schema_extra=_meta("APOLLO scale type"),
    )
    layerwise: bool = Field(
        False,
        description="GaLore / APOLLO: update layer by layer during backward (less memory; one process only, no "
        "gradient accumulation)",
        json_schema_extra=_meta("Layer-wise update"),
    )


class BadamSpec(_Spec):
    mode: Literal["layer", "ratio"] = Field(
        "layer",
        description="BAdam: update one block of layers at a time (layer) or a fraction of every weight (ratio)",
        json_schema_extra=_meta("BAdam mode"),
    )
    start_block: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="BAdam layer mode: the block trained first (empty: the first)",
        json_schema_extra=_meta("BAdam start block"),
    )
    switch_mode: Literal["ascending", "descending", "random", "fixed"] = Field(
        "ascending",
        description="BAdam layer mode: the order in which blocks take turns",
        json_schema_extra=_meta("BAdam switch mode"),
    )
    switch_interval: int = Field(
        50,
        ge=-1,
        le=10_000_000,
        description="BAdam layer mode: steps before the next block (-1: never switch)",
        json_schema_extra=_meta("BAdam switch interval"),
    )
    update_ratio: float = Field(
        0.05,
        gt=0,
        le=1.0,
        description="BAdam ratio mode: fraction of each weight updated",
        json_schema_extra=_meta("BAdam update ratio"),
    )
    mask_mode: Literal["adjacent", "scatter"] = Field(
        "adjacent",
        description="BAdam ratio mode: the updated entries are adjacent or scattered",
        json_schema_extra=_meta("BAdam mask mode"),
    )
    verbose: int = Field(
        0,
        ge=0,
        le=2,
        description="BAdam: 0 quiet, 1 print the block, 2 print the trainable parameters",
        json_schema_extra=_meta("BAdam verbosity"),
    )


class TrainSpec(_Spec):
    num_epochs: float = Field(
        3.0,
        gt=0,
        le=1000,
        description="Epochs (ignored when max steps > 0)",
        json_schema_extra=_meta("Epochs"),
    )
    max_steps: int = Field(
        -1,
        ge=-1,
        le=10_000_000,
        description="Stop after this many optimizer steps (-1: use epochs)",
        json_schema_extra=_meta("Max steps"),
    )
    learning_rate: float = Field(
        1e-4,
        gt=0,
        le=1.0,
        description="Peak learning rate",
        json_schema_extra=_meta("Learning rate", step=1e-6),
    )
    lr_scheduler: Literal[
        "cosine", "linear", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial"
    ] = Field("cosine", description="Learning-rate schedule", json_schema_extra=_meta("LR scheduler"))
    warmup_ratio: float = Field(
        0.0,
        ge=0.0,
        le=0.5,
        description="Warm-up as a fraction of the steps (used when warm-up steps is 0)",
        json_schema_extra=_meta("Warm-up ratio"),
    )
    warmup_steps: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Warm-up steps (overrides the ratio when > 0)",
        json_schema_extra=_meta("Warm-up steps", advanced=True),
    )
    weight_decay: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="AdamW weight decay",
        json_schema_extra=_meta("Weight decay", advanced=True),
    )
    optimizer: Literal[
        "adamw_torch",
        "adamw_8bit",
        "paged_adamw_8bit",
        "adafactor",
        "sgd",
        "galore_adamw",
        "galore_adamw_8bit",
        "galore_adafactor",
        "apollo_adamw",
        "adam_mini",
        "muon",
        "badam",
    ] = Field(
        "adamw_torch",
        description="Optimizer (8-bit variants through bitsandbytes). Full / freeze only: galore_* and apollo_adamw "
        "project the gradients of linear layers to low rank (train.low_rank; packages galore-torch / apollo-torch), "
        "badam updates one block of layers at a time (train.badam; package badam). adam_mini (package adam-mini) and "
        "muon (package muon) also train adapters",
        json_schema_extra=_meta("Optimizer", advanced=True),
    )
    low_rank: LowRankOptimSpec = Field(default_factory=lambda: LowRankOptimSpec())
    badam: BadamSpec = Field(default_factory=lambda: BadamSpec())
    per_device_batch_size: int = Field(
        2,
        ge=1,
        le=4096,
        description="Samples per device per micro-step",
        json_schema_extra=_meta("Batch size per device"),
    )
    gradient_accumulation: int = Field(
        8,
        ge=1,
        le=4096,
        description="Micro-steps per optimizer step",
        json_schema_extra=_meta("Gradient accumulation"),
    )
    max_grad_norm: float = Field(
        1.0,
        ge=0.0,
        le=1e6,
        description="Clip gradients to this norm (0: off)",
        json_schema_extra=_meta("Max grad norm", advanced=True),
    )
    loss: Literal["cross_entropy", "dft", "asft", "eaft"] = Field(
        "cross_entropy",
        description="sft's token loss: cross_entropy; dft weights each token's cross-entropy by the model's "
        "probability of it (detached); asft is dft plus asft_alpha times the KL divergence from the frozen base "
        "model; eaft weights each token by its top-20 entropy / 3 to the power eaft_alpha (LLaMA-Factory's "
        "use_dft_loss / use_asft_loss / use_eaft_loss)",
        json_schema_extra=_meta("Loss", advanced=True),
    )
    asft_alpha: float = Field(
        0.1,
        ge=0.0,
        le=100.0,
        description="asft: weight of the KL divergence from the frozen base model (LLaMA-Factory's default 0.1)",
        json_schema_extra=_meta("ASFT KL weight", advanced=True),
    )
    eaft_alpha: float = Field(
        1.0,
        ge=0.0,
        le=100.0,
        description="eaft: exponent of the entropy weight (LLaMA-Factory's default 1.0)",
        json_schema_extra=_meta("EAFT entropy exponent", advanced=True),
    )
    liger_kernel: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Liger kernels on CUDA (fused linear cross-entropy: the logits are never materialised; RMSNorm, "
        "RoPE, SwiGLU): auto uses them where the liger-kernel package is installed and the architecture is "
        "supported; refused on CPU",
        json_schema_extra=_meta("Liger kernels", advanced=True),
    )
    trained_logits_only: bool = Field(
        True,
        description="Compute the output layer and the loss only at the positions whose next token is trained "
        "(prompt and pad positions skipped): the same loss with less time and memory. Used for sft where the "
        "model's forward supports it (transformers' logits_to_keep) and Liger kernels are off",
        json_schema_extra=_meta("Logits on trained tokens only", advanced=True),
    )
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        "auto",
        description="Mixed precision: auto picks bf16 where the GPU has it, else fp16; fp32 on CPU",
        json_schema_extra=_meta("Precision"),
    )
    fp8: bool = Field(
        False,
        description="FP8 training through accelerate: the linear layers' matmuls in FP8, the rest in bf16. Needs an "
        "NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper) and the backend's package",
        json_schema_extra=_meta("FP8 training", advanced=True),
    )
    fp8_backend: Literal["auto", "torchao", "te"] = Field(
        "auto",
        description="FP8 backend: torchao, te (NVIDIA Transformer Engine), or auto (torchao where installed, else te)",
        json_schema_extra=_meta("FP8 backend", advanced=True),
    )
    gradient_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Recompute activations in backward: less memory, ~30% slower. auto: off when the memory plan "
        "fits the GPUs with a 10% margin, on otherwise (true / false are on / off)",
        json_schema_extra=_meta("Gradient checkpointing"),
    )

    @field_validator("gradient_checkpointing", mode="before")
    @classmethod
    def _checkpointing_bool(cls, value: Any) -> Any:
        """true / false (specs written before auto, LLaMA-Factory's booleans) are on / off."""
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    seed: int = Field(
        42,
        ge=0,
        le=2**32 - 1,
        description="Random seed",
        json_schema_extra=_meta("Seed", advanced=True),
    )
    logging_steps: int = Field(
        10,
        ge=1,
        le=1_000_000,
        description="Log every N optimizer steps",
        json_schema_extra=_meta("Logging steps"),
    )
    save_steps: int = Field(
        500,
        ge=1,
        le=10_000_000,
        description="Save a checkpoint every N steps",
        json_schema_extra=_meta("Save steps"),
    )
    eval_steps: int = Field(
        500,
        ge=1,
        le=10_000_000,
        description="Evaluate every N steps (with a validation split)",
        json_schema_extra=_meta("Eval steps", advanced=True),
    )
    save_total_limit: int | None = Field(
        3,
        ge=1,
        le=10_000,
        description="Keep at most this many checkpoints (empty: all)",
        json_schema_extra=_meta("Checkpoint limit", advanced=True),
    )
    resume_from: str | None = Field(
        None,
        description="Resume from a checkpoint folder, or 'last' for the newest in the output folder",
        json_schema_extra=_meta("Resume from", advanced=True),
    )
    save_strategy: Literal["steps", "epoch", "best", "no"] = Field(
        "steps",
        description="When to save checkpoints: every save steps, every epoch, when the evaluation loss improves "
        "(best; needs a validation split), or never (the final model is saved anyway)",
        json_schema_extra=_meta("Save strategy", advanced=True),
    )
    save_only_model: bool = Field(
        False,
        description="Checkpoints hold the weights only (no optimizer or scheduler state): smaller, but a run cannot "
        "resume from them",
        json_schema_extra=_meta("Save only the model", advanced=True),
    )
    eval_strategy: Literal["steps", "epoch", "no"] = Field(
        "steps",
        description="When to evaluate on the validation split: every eval steps, every epoch, or never",
        json_schema_extra=_meta("Eval strategy", advanced=True),
    )
    per_device_eval_batch_size: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="Samples per device per evaluation step (empty: the training batch size)",
        json_schema_extra=_meta("Eval batch size per device", advanced=True),
    )
    neftune_noise_alpha: float | None = Field(
        None,
        gt=0,
        le=100,
        description="NEFTune: add noise of this scale to the input embeddings while training (empty: off; typical 5)",
        json_schema_extra=_meta("NEFTune noise alpha", advanced=True),
    )
    count_input_tokens: Literal["non_padding", "all", "no"] = Field(
        "non_padding",
        description="Count the input tokens seen (for tokens/s and the token total): non_padding, all (padding "
        "too), or no",
        json_schema_extra=_meta("Count input tokens", advanced=True),
    )
    extra_args: dict[str, Any] = Field(
        default_factory=dict,
        description="More Hugging Face TrainingArguments, passed to the Trainer as given (YAML or JSON mapping, "
        "e.g. {adam_beta2: 0.95}); only fields of the installed transformers that no other setting covers",
        json_schema_extra=_meta("Extra training arguments", advanced=True),
    )


def loss_errors(spec) -> list[tuple[str, Any]]:
    """``train.loss``'s rules, as (field path, message) pairs for ``engine.spec.rules.cross_field_errors``: the
    token losses weight sft's answer tokens from the logits (LLaMA-Factory's sft trainer is where it has them), and
    asft's reference is the base model as training starts (engine.trainer.sft_losses)."""
    from engine.spec.messages import message

    t, m = spec.train, spec.method
    if t.loss == "cross_entropy":
        return []
    errors = []
    if m.stage != "sft":
        errors.append(("train.loss", message("loss_stage", loss=t.loss, stage=m.stage)))
    if t.liger_kernel == "on":
        errors.append(("train.liger_kernel", message("liger_loss", loss=t.loss)))
    if t.loss == "asft" and m.finetuning == "lora" and m.lora.pissa_init:
        errors.append(("train.loss", message("asft_pissa")))
    zero3 = spec.launch.backend == "deepspeed" and spec.launch.deepspeed.zero_stage == 3
    if t.loss == "asft" and zero3 and not m.adapter:
        errors.append(("train.loss", message("asft_zero3")))
    return errors


def fp8_errors(spec) -> list[tuple[str, Any]]:
    """``train.fp8``'s rules, for ``engine.spec.rules.cross_field_errors``: FP8 layers inside bf16 autocast (what
    accelerate runs around them), on a GPU, with the backend's package here; the GPU's compute capability is checked
    at launch (engine.runs.launch, engine.machine.kernels.fp8_device_refusal)."""
    from engine.machine.kernels import fp8_backend_missing, module_installed
    from engine.spec.messages import message

    t = spec.train
    if not t.fp8:
        return []
    errors = []
    if spec.launch.device == "cpu":
        errors.append(("train.fp8", message("fp8_cpu")))
    if t.precision in ("fp16", "fp32"):
        errors.append(("train.precision", message("fp8_precision", precision=t.precision)))
    if spec.method.quantization.bits:
        errors.append(("train.fp8", message("fp8_quantized", bits=spec.method.quantization.bits)))
    ao = t.fp8_backend == "torchao" or (t.fp8_backend == "auto" and module_installed("torchao"))
    if ao and spec.launch.backend == "fsdp" and spec.launch.fsdp.cpu_ram_efficient_loading:
        errors.append(("launch.fsdp.cpu_ram_efficient_loading", message("fp8_fsdp_loading")))
    missing = fp8_backend_missing(t.fp8_backend)
    if missing:
        errors.append(("train.fp8_backend", message("fp8_missing", backend=t.fp8_backend, install=missing)))
    return errors
