"""The run spec: the one source of truth for what a run is, and all of its validation.

Light: pydantic, yaml and the stdlib only (never torch). The UI builds its widgets from the ``Field`` metadata
(description, default, range, choices, ``json_schema_extra`` label/group/advanced), the launcher builds
commands from it, the trainer reads it.

Three layers of checks, all here:
- field rules (types, ranges, choices): pydantic, messages carry the dotted field path;
- cross-field rules: ``RunSpec._cross_field_rules``, each message names its fields and the fix;
- context rules that read files (the model's ``config.json``, the dataset registry): ``check_context``.
``validate_spec`` runs all three and returns every problem; ``load_spec`` raises ``SpecError`` on any.
Legal but unwise combinations are ``spec_warnings``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SCHEMA_VERSION = 1

# Module names of common decoder architectures, for LoRA targets and freeze checks without loading a model.
ARCH_LINEAR_MODULES: dict[str, list[str]] = {
    "llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "mistral": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "qwen2": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "qwen3": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gemma": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "gemma2": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "mixtral": ["q_proj", "k_proj", "v_proj", "o_proj", "w1", "w2", "w3", "gate"],
    "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
}


def _meta(label: str, *, group: str = "", advanced: bool = False, label_zh: str = "", **extra: Any) -> dict:
    return {"label": label, "label_zh": label_zh or label, "group": group, "advanced": advanced, **extra}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


# ----------------------------------------------------------------------------------------------- model
class RopeScalingSpec(_Spec):
    type: Literal["linear", "dynamic", "yarn", "llama3"] = Field(
        "linear", description="RoPE scaling method", json_schema_extra=_meta("RoPE scaling", label_zh="RoPE 缩放")
    )
    factor: float = Field(
        2.0,
        ge=1.0,
        le=64.0,
        description="Context length multiplier",
        json_schema_extra=_meta("RoPE factor", label_zh="RoPE 倍数"),
    )


class ModelSpec(_Spec):
    name_or_path: str = Field(
        ...,
        min_length=1,
        description="Local model folder or Hugging Face hub id (org/name)",
        json_schema_extra=_meta("Model", label_zh="模型"),
    )
    revision: str = Field(
        "main",
        min_length=1,
        description="Hub revision (branch, tag or commit); ignored for local folders",
        json_schema_extra=_meta("Revision", advanced=True, label_zh="版本"),
    )
    trust_remote_code: bool = Field(
        False,
        description="Run Python code shipped with the model. Only for models you trust.",
        json_schema_extra=_meta("Trust remote code", advanced=True, label_zh="信任远程代码"),
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="dtype the base weights are loaded in (auto: from precision)",
        json_schema_extra=_meta("Weights dtype", advanced=True, label_zh="权重精度"),
    )
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = Field(
        "sdpa",
        description="Attention kernel: sdpa (PyTorch), eager, or flash_attention_2 (CUDA, fp16/bf16)",
        json_schema_extra=_meta("Attention", advanced=True, label_zh="注意力实现"),
    )
    rope_scaling: RopeScalingSpec | None = Field(
        None,
        description="Extend the context with RoPE scaling (empty: off)",
        json_schema_extra=_meta("RoPE scaling", advanced=True, label_zh="RoPE 缩放"),
    )


# ----------------------------------------------------------------------------------------------- method
class LoraSpec(_Spec):
    rank: int = Field(
        8, ge=1, le=1024, description="LoRA rank r", json_schema_extra=_meta("LoRA rank", label_zh="LoRA 秩")
    )
    alpha: float = Field(
        16.0,
        gt=0,
        le=4096,
        description="LoRA alpha (scale = alpha / rank, or alpha / sqrt(rank) with rsLoRA)",
        json_schema_extra=_meta("LoRA alpha", label_zh="LoRA alpha"),
    )
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Dropout on the LoRA input",
        json_schema_extra=_meta("LoRA dropout", label_zh="LoRA 丢弃率"),
    )
    targets: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        description="Module names to adapt (e.g. q_proj, v_proj), or 'all' for every linear layer",
        json_schema_extra=_meta("LoRA targets", label_zh="LoRA 作用模块"),
    )
    use_rslora: bool = Field(
        False,
        description="Rank-stabilised LoRA scaling",
        json_schema_extra=_meta("rsLoRA", advanced=True, label_zh="rsLoRA"),
    )
    use_dora: bool = Field(
        False,
        description="Weight-decomposed LoRA (DoRA)",
        json_schema_extra=_meta("DoRA", advanced=True, label_zh="DoRA"),
    )


class FreezeSpec(_Spec):
    trainable_layers: int = Field(
        2,
        ge=1,
        le=1024,
        description="Train the last N decoder layers (the rest stay frozen)",
        json_schema_extra=_meta("Trainable layers", label_zh="可训练层数"),
    )
    trainable_modules: list[str] = Field(
        default_factory=list,
        description="Only these module names inside the trainable layers (empty: every module of those layers)",
        json_schema_extra=_meta("Trainable modules", advanced=True, label_zh="可训练模块"),
    )
    extra_modules: list[str] = Field(
        default_factory=list,
        description="Extra modules to train outside the layers, e.g. lm_head, embed_tokens",
        json_schema_extra=_meta("Extra trainable modules", advanced=True, label_zh="额外可训练模块"),
    )


class QuantSpec(_Spec):
    bits: Literal[0, 4, 8] = Field(
        0,
        description="Load the base in 4 or 8 bit with bitsandbytes (QLoRA); 0 = off",
        json_schema_extra=_meta("Quantization bits", label_zh="量化位数"),
    )
    quant_type: Literal["nf4", "fp4"] = Field(
        "nf4", description="4-bit data type", json_schema_extra=_meta("4-bit type", advanced=True, label_zh="4 位类型")
    )
    double_quant: bool = Field(
        True,
        description="Quantize the quantization constants too (saves ~0.4 bit/param)",
        json_schema_extra=_meta("Double quantization", advanced=True, label_zh="双重量化"),
    )
    compute_dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="dtype of the matmuls on dequantized weights (auto: from precision)",
        json_schema_extra=_meta("Compute dtype", advanced=True, label_zh="计算精度"),
    )


class DpoSpec(_Spec):
    beta: float = Field(
        0.1, gt=0, le=10, description="DPO temperature beta", json_schema_extra=_meta("DPO beta", label_zh="DPO beta")
    )
    loss_type: Literal["sigmoid", "hinge", "ipo"] = Field(
        "sigmoid", description="DPO loss", json_schema_extra=_meta("DPO loss", advanced=True, label_zh="DPO 损失")
    )


class MethodSpec(_Spec):
    stage: Literal["sft", "pt", "dpo"] = Field(
        "sft",
        description="sft: supervised fine-tuning; pt: continued pre-training on text; dpo: preference pairs",
        json_schema_extra=_meta("Stage", label_zh="训练阶段"),
    )
    finetuning: Literal["lora", "full", "freeze"] = Field(
        "lora",
        description="lora: train adapters (QLoRA with quantization); full: every weight; freeze: last layers",
        json_schema_extra=_meta("Method", label_zh="微调方法"),
    )
    lora: LoraSpec = Field(default_factory=LoraSpec)
    freeze: FreezeSpec = Field(default_factory=FreezeSpec)
    quantization: QuantSpec = Field(default_factory=QuantSpec)
    dpo: DpoSpec = Field(default_factory=DpoSpec)


# ----------------------------------------------------------------------------------------------- data
class DataSpec(_Spec):
    datasets: list[str] = Field(
        ...,
        min_length=1,
        description="Dataset names from the registry (dataset_info.json); several are mixed",
        json_schema_extra=_meta("Datasets", label_zh="数据集"),
    )
    dataset_dir: str = Field(
        "",
        description="Folder holding dataset_info.json (empty: the workspace's data folder)",
        json_schema_extra=_meta("Dataset folder", advanced=True, label_zh="数据目录"),
    )
    mix: Literal["concat", "interleave_under", "interleave_over"] = Field(
        "concat",
        description="How several datasets are combined: concatenate, or interleave (stop at the "
        "shortest / oversample to the longest)",
        json_schema_extra=_meta("Mixing", advanced=True, label_zh="混合方式"),
    )
    mix_probs: list[float] | None = Field(
        None,
        description="Sampling probabilities for interleaving, one per dataset (empty: equal)",
        json_schema_extra=_meta("Mixing probabilities", advanced=True, label_zh="混合概率"),
    )
    template: str = Field(
        "auto",
        min_length=1,
        description="Chat template: auto (the tokenizer's own, else default), llama3, chatml, qwen, mistral, gemma, "
        "alpaca, default, empty",
        json_schema_extra=_meta("Template", label_zh="对话模板"),
    )
    cutoff_len: int = Field(
        1024,
        ge=8,
        le=1_048_576,
        description="Maximum tokens per sample; longer samples are truncated",
        json_schema_extra=_meta("Cutoff length", label_zh="截断长度"),
    )
    max_samples: int | None = Field(
        None,
        ge=1,
        description="Use at most this many rows per dataset (empty: all)",
        json_schema_extra=_meta("Max samples", label_zh="最大样本数"),
    )
    val_size: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Fraction (<1) of rows held out for evaluation (0: no evaluation)",
        json_schema_extra=_meta("Validation size", label_zh="验证集比例"),
    )
    packing: bool = Field(
        False,
        description="Pack several samples per row with no attention across them (faster on short data)",
        json_schema_extra=_meta("Packing", label_zh="序列打包"),
    )
    train_on_prompt: bool = Field(
        False,
        description="Also compute the loss on prompt tokens",
        json_schema_extra=_meta("Train on prompt", advanced=True, label_zh="训练提示词"),
    )
    preprocessing_workers: int = Field(
        1,
        ge=1,
        le=256,
        description="Processes for tokenisation",
        json_schema_extra=_meta("Preprocessing workers", advanced=True, label_zh="预处理进程数"),
    )


# ----------------------------------------------------------------------------------------------- train
class TrainSpec(_Spec):
    num_epochs: float = Field(
        3.0,
        gt=0,
        le=1000,
        description="Epochs (ignored when max steps > 0)",
        json_schema_extra=_meta("Epochs", label_zh="训练轮数"),
    )
    max_steps: int = Field(
        -1,
        ge=-1,
        le=10_000_000,
        description="Stop after this many optimizer steps (-1: use epochs)",
        json_schema_extra=_meta("Max steps", label_zh="最大步数"),
    )
    learning_rate: float = Field(
        1e-4,
        gt=0,
        le=1.0,
        description="Peak learning rate",
        json_schema_extra=_meta("Learning rate", label_zh="学习率", step=1e-6),
    )
    lr_scheduler: Literal[
        "cosine", "linear", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial"
    ] = Field(
        "cosine", description="Learning-rate schedule", json_schema_extra=_meta("LR scheduler", label_zh="学习率调度")
    )
    warmup_ratio: float = Field(
        0.0,
        ge=0.0,
        le=0.5,
        description="Warm-up as a fraction of the steps (used when warm-up steps is 0)",
        json_schema_extra=_meta("Warm-up ratio", label_zh="预热比例"),
    )
    warmup_steps: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Warm-up steps (overrides the ratio when > 0)",
        json_schema_extra=_meta("Warm-up steps", advanced=True, label_zh="预热步数"),
    )
    weight_decay: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="AdamW weight decay",
        json_schema_extra=_meta("Weight decay", advanced=True, label_zh="权重衰减"),
    )
    optimizer: Literal["adamw_torch", "adamw_8bit", "paged_adamw_8bit", "adafactor", "sgd"] = Field(
        "adamw_torch",
        description="Optimizer (8-bit variants through bitsandbytes)",
        json_schema_extra=_meta("Optimizer", advanced=True, label_zh="优化器"),
    )
    per_device_batch_size: int = Field(
        2,
        ge=1,
        le=4096,
        description="Samples per device per micro-step",
        json_schema_extra=_meta("Batch size per device", label_zh="每卡批大小"),
    )
    gradient_accumulation: int = Field(
        8,
        ge=1,
        le=4096,
        description="Micro-steps per optimizer step",
        json_schema_extra=_meta("Gradient accumulation", label_zh="梯度累积"),
    )
    max_grad_norm: float = Field(
        1.0,
        ge=0.0,
        le=1e6,
        description="Clip gradients to this norm (0: off)",
        json_schema_extra=_meta("Max grad norm", advanced=True, label_zh="梯度裁剪"),
    )
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        "auto",
        description="Mixed precision: auto picks bf16 where the GPU has it, else fp16; fp32 on CPU",
        json_schema_extra=_meta("Precision", label_zh="计算精度"),
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in backward: less memory, ~30% slower",
        json_schema_extra=_meta("Gradient checkpointing", label_zh="梯度检查点"),
    )
    seed: int = Field(
        42,
        ge=0,
        le=2**32 - 1,
        description="Random seed",
        json_schema_extra=_meta("Seed", advanced=True, label_zh="随机种子"),
    )
    logging_steps: int = Field(
        10,
        ge=1,
        le=1_000_000,
        description="Log every N optimizer steps",
        json_schema_extra=_meta("Logging steps", label_zh="日志间隔"),
    )
    save_steps: int = Field(
        500,
        ge=1,
        le=10_000_000,
        description="Save a checkpoint every N steps",
        json_schema_extra=_meta("Save steps", label_zh="保存间隔"),
    )
    eval_steps: int = Field(
        500,
        ge=1,
        le=10_000_000,
        description="Evaluate every N steps (with a validation split)",
        json_schema_extra=_meta("Eval steps", advanced=True, label_zh="评估间隔"),
    )
    save_total_limit: int | None = Field(
        3,
        ge=1,
        le=10_000,
        description="Keep at most this many checkpoints (empty: all)",
        json_schema_extra=_meta("Checkpoint limit", advanced=True, label_zh="检查点上限"),
    )
    resume_from: str | None = Field(
        None,
        description="Resume from a checkpoint folder, or 'last' for the newest in the output folder",
        json_schema_extra=_meta("Resume from", advanced=True, label_zh="断点续训"),
    )


# ----------------------------------------------------------------------------------------------- launch
class DeepSpeedSpec(_Spec):
    zero_stage: Literal[0, 1, 2, 3] = Field(
        2,
        description="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also parameters",
        json_schema_extra=_meta("ZeRO stage", label_zh="ZeRO 阶段"),
    )
    offload_optimizer: Literal["none", "cpu", "nvme"] = Field(
        "none",
        description="Where optimizer states live (needs ZeRO stage ≥ 1)",
        json_schema_extra=_meta("Offload optimizer", label_zh="优化器卸载"),
    )
    offload_param: Literal["none", "cpu", "nvme"] = Field(
        "none",
        description="Where parameters live (ZeRO-3 only; large slowdown)",
        json_schema_extra=_meta("Offload parameters", label_zh="参数卸载"),
    )
    nvme_path: str = Field(
        "",
        description="Folder for NVMe offload",
        json_schema_extra=_meta("NVMe path", advanced=True, label_zh="NVMe 路径"),
    )
    pin_memory: bool = Field(
        True,
        description="Pin offloaded CPU memory",
        json_schema_extra=_meta("Pin memory", advanced=True, label_zh="锁页内存"),
    )
    overlap_comm: bool = Field(
        True,
        description="Overlap reduction with backward",
        json_schema_extra=_meta("Overlap comm", advanced=True, label_zh="通信重叠"),
    )
    contiguous_gradients: bool = Field(
        True,
        description="Copy gradients to a contiguous buffer",
        json_schema_extra=_meta("Contiguous gradients", advanced=True, label_zh="连续梯度"),
    )
    sub_group_size: int = Field(
        1_000_000_000,
        ge=1,
        description="ZeRO-3 sub-group size (elements)",
        json_schema_extra=_meta("Sub-group size", advanced=True, label_zh="子组大小"),
    )
    reduce_bucket_size: int = Field(
        500_000_000,
        ge=1,
        description="Reduce bucket size (elements)",
        json_schema_extra=_meta("Reduce bucket size", advanced=True, label_zh="归约桶大小"),
    )
    steps_per_print: int = Field(
        10,
        ge=1,
        description="DeepSpeed's own log interval",
        json_schema_extra=_meta("Steps per print", advanced=True, label_zh="打印间隔"),
    )


class FsdpSpec(_Spec):
    sharding_strategy: Literal["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD"] = Field(
        "FULL_SHARD", description="What FSDP shards", json_schema_extra=_meta("Sharding strategy", label_zh="分片策略")
    )
    auto_wrap_policy: Literal["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"] = Field(
        "TRANSFORMER_BASED_WRAP",
        description="How modules are wrapped",
        json_schema_extra=_meta("Auto-wrap policy", label_zh="自动包装策略"),
    )
    layer_cls_to_wrap: str = Field(
        "auto",
        min_length=1,
        description="Decoder layer class to wrap (auto: from the model's config)",
        json_schema_extra=_meta("Layer class", advanced=True, label_zh="包装层类"),
    )
    min_num_params: int = Field(
        100_000_000,
        ge=1,
        description="Size threshold for SIZE_BASED_WRAP",
        json_schema_extra=_meta("Min params per wrap", advanced=True, label_zh="最小参数量"),
    )
    offload_params: bool = Field(
        False,
        description="Offload parameters to CPU",
        json_schema_extra=_meta("Offload parameters", label_zh="参数卸载"),
    )
    state_dict_type: Literal["FULL_STATE_DICT", "SHARDED_STATE_DICT"] = Field(
        "FULL_STATE_DICT",
        description="How checkpoints are saved",
        json_schema_extra=_meta("State dict type", advanced=True, label_zh="状态字典类型"),
    )
    cpu_ram_efficient_loading: bool = Field(
        True,
        description="Load weights on rank 0 only",
        json_schema_extra=_meta("RAM-efficient loading", advanced=True, label_zh="节省内存加载"),
    )


class LaunchSpec(_Spec):
    backend: Literal["single", "ddp", "fsdp", "deepspeed"] = Field(
        "single",
        description="single process, DDP (data parallel), FSDP (sharded), or DeepSpeed ZeRO",
        json_schema_extra=_meta("Backend", label_zh="分布式后端"),
    )
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="auto: GPUs when present, else CPU", json_schema_extra=_meta("Device", label_zh="设备")
    )
    gpus: list[int] | None = Field(
        None,
        description="Explicit GPU ids (empty: any free ones, as many as processes)",
        json_schema_extra=_meta("GPUs", label_zh="GPU 编号"),
    )
    num_processes: int = Field(
        1,
        ge=1,
        le=1024,
        description="Processes (one per GPU) on each machine",
        json_schema_extra=_meta("Processes per machine", label_zh="每机进程数"),
    )
    share_gpus: bool = Field(
        False,
        description="Allow this run on GPUs another run is using",
        json_schema_extra=_meta("Share GPUs", advanced=True, label_zh="共享 GPU"),
    )
    num_machines: int = Field(
        1,
        ge=1,
        le=4096,
        description="Machines (nodes) in the run",
        json_schema_extra=_meta("Machines", advanced=True, label_zh="机器数"),
    )
    machine_rank: int = Field(
        0,
        ge=0,
        description="This machine's rank (0 = main)",
        json_schema_extra=_meta("Machine rank", advanced=True, label_zh="机器序号"),
    )
    main_process_ip: str = Field(
        "",
        description="Address of the rank-0 machine (several machines)",
        json_schema_extra=_meta("Main address", advanced=True, label_zh="主节点地址"),
    )
    main_process_port: int = Field(
        29500,
        ge=1024,
        le=65535,
        description="Rendezvous port",
        json_schema_extra=_meta("Main port", advanced=True, label_zh="主节点端口"),
    )
    deepspeed: DeepSpeedSpec = Field(default_factory=DeepSpeedSpec)
    fsdp: FsdpSpec = Field(default_factory=FsdpSpec)


# ----------------------------------------------------------------------------------------------- output
class OutputSpec(_Spec):
    run_name: str = Field(
        "",
        max_length=120,
        pattern=r"^[A-Za-z0-9._\-\u4e00-\u9fff ]*$",
        description="A name for the run (letters, digits, . _ - and spaces)",
        json_schema_extra=_meta("Run name", label_zh="运行名称"),
    )
    output_dir: str = Field(
        "",
        description="Where checkpoints and the adapter go (empty: the run's folder)",
        json_schema_extra=_meta("Output folder", advanced=True, label_zh="输出目录"),
    )
    report_to: list[Literal["tensorboard", "wandb", "none"]] = Field(
        default_factory=lambda: ["tensorboard"],
        description="Experiment trackers (tensorboard works offline)",
        json_schema_extra=_meta("Report to", advanced=True, label_zh="记录到"),
    )


# ----------------------------------------------------------------------------------------------- run
class RunSpec(_Spec):
    schema_version: int = Field(SCHEMA_VERSION, description="Spec schema version")
    model: ModelSpec
    method: MethodSpec = Field(default_factory=MethodSpec)
    data: DataSpec
    train: TrainSpec = Field(default_factory=TrainSpec)
    launch: LaunchSpec = Field(default_factory=LaunchSpec)
    output: OutputSpec = Field(default_factory=OutputSpec)

    @model_validator(mode="after")
    def _cross_field_rules(self) -> RunSpec:
        errors = cross_field_errors(self)
        if errors:
            raise ValueError("; ".join(f"{path}: {msg}" for path, msg in errors))
        return self

    @property
    def world_size(self) -> int:
        return self.launch.num_processes * self.launch.num_machines

    @property
    def effective_batch(self) -> int:
        return self.train.per_device_batch_size * self.train.gradient_accumulation * self.world_size


def cross_field_errors(spec: RunSpec) -> list[tuple[str, str]]:
    """Rules between fields that need no files. Each is (field path, message with the fix)."""
    m, t, ln, d = spec.method, spec.train, spec.launch, spec.data
    errors: list[tuple[str, str]] = []
    if m.quantization.bits and m.finetuning != "lora":
        errors.append(
            (
                "method.quantization.bits",
                f"{m.quantization.bits}-bit quantization trains only adapters: set "
                "method.finetuning to lora (QLoRA), or quantization bits to 0",
            )
        )
    if m.lora.use_dora and m.quantization.bits == 8:
        errors.append(("method.lora.use_dora", "DoRA is not supported on 8-bit weights: use 4-bit or no quantization"))
    if ln.backend == "deepspeed":
        ds = ln.deepspeed
        if ds.offload_optimizer != "none" and ds.zero_stage < 1:
            errors.append(
                (
                    "launch.deepspeed.offload_optimizer",
                    "optimizer offload needs ZeRO stage 1, 2 or 3: raise launch.deepspeed.zero_stage",
                )
            )
        if ds.offload_param != "none" and ds.zero_stage != 3:
            errors.append(
                (
                    "launch.deepspeed.offload_param",
                    "parameter offload needs ZeRO stage 3: set "
                    "launch.deepspeed.zero_stage to 3 or offload_param to none",
                )
            )
        if "nvme" in (ds.offload_optimizer, ds.offload_param) and not ds.nvme_path:
            errors.append(
                ("launch.deepspeed.nvme_path", "NVMe offload needs a folder: set launch.deepspeed.nvme_path")
            )
        # QLoRA 4-bit shards under ZeRO-3 (the seed's worked example) with bf16/fp16 4-bit storage; 8-bit cannot.
        if m.quantization.bits == 8 and ds.zero_stage == 3:
            errors.append(
                (
                    "method.quantization.bits",
                    "8-bit bitsandbytes weights cannot be sharded by ZeRO-3: use "
                    "4-bit (QLoRA), ZeRO stage 0-2, or quantization bits 0",
                )
            )
        if m.quantization.bits == 4 and ds.zero_stage == 3 and m.quantization.compute_dtype == "float32":
            errors.append(
                (
                    "method.quantization.compute_dtype",
                    "4-bit with ZeRO-3 needs bfloat16 or float16 storage: set compute_dtype to bfloat16",
                )
            )
    if ln.backend == "fsdp" and m.quantization.bits == 8:
        errors.append(
            (
                "method.quantization.bits",
                "FSDP cannot shard 8-bit bitsandbytes weights: use 4-bit (QLoRA with FSDP) or another backend",
            )
        )
    if ln.backend == "fsdp" and m.quantization.bits == 4 and m.quantization.compute_dtype == "float32":
        errors.append(
            (
                "method.quantization.compute_dtype",
                "4-bit with FSDP needs bfloat16 or float16 storage: set compute_dtype to bfloat16",
            )
        )
    if ln.backend == "single" and ln.num_processes > 1:
        errors.append(
            (
                "launch.num_processes",
                f"{ln.num_processes} processes need a distributed backend: set "
                "launch.backend to ddp, fsdp or deepspeed, or num_processes to 1",
            )
        )
    if ln.backend == "single" and ln.num_machines > 1:
        errors.append(("launch.num_machines", "several machines need a distributed backend (ddp, fsdp, deepspeed)"))
    if ln.gpus is not None:
        if len(set(ln.gpus)) != len(ln.gpus) or any(g < 0 for g in ln.gpus):
            errors.append(("launch.gpus", "GPU ids must be distinct and ≥ 0"))
        elif ln.num_processes > len(ln.gpus):
            errors.append(
                (
                    "launch.num_processes",
                    f"{ln.num_processes} processes per machine but only "
                    f"{len(ln.gpus)} GPU(s) chosen in launch.gpus: choose more GPUs or fewer processes",
                )
            )
        if ln.device == "cpu" and ln.gpus:
            errors.append(("launch.gpus", "GPUs chosen but launch.device is cpu: clear launch.gpus or use auto/cuda"))
    if ln.num_machines > 1:
        if not ln.main_process_ip.strip():
            errors.append(
                (
                    "launch.main_process_ip",
                    f"{ln.num_machines} machines need the rank-0 machine's address in launch.main_process_ip",
                )
            )
    if ln.machine_rank >= ln.num_machines:
        errors.append(
            (
                "launch.machine_rank",
                f"machine rank {ln.machine_rank} must be below launch.num_machines ({ln.num_machines})",
            )
        )
    if ln.backend == "fsdp" and ln.device == "cpu":
        errors.append(("launch.backend", "FSDP needs GPUs: on CPU use ddp or deepspeed"))
    if t.precision == "fp16" and ln.device == "cpu":
        errors.append(("train.precision", "fp16 mixed precision needs a GPU: use bf16 or fp32 on CPU"))
    if d.mix_probs is not None:
        if len(d.mix_probs) != len(d.datasets):
            errors.append(
                (
                    "data.mix_probs",
                    f"{len(d.mix_probs)} probabilities for {len(d.datasets)} datasets: give one per dataset",
                )
            )
        elif not all(p >= 0 for p in d.mix_probs) or abs(sum(d.mix_probs) - 1.0) > 1e-6:  # `not all` also catches NaN
            errors.append(("data.mix_probs", "probabilities must be ≥ 0 and sum to 1"))
        if d.mix == "concat":
            errors.append(
                (
                    "data.mix_probs",
                    "probabilities apply to interleaving: set data.mix to interleave_under "
                    "or interleave_over, or clear data.mix_probs",
                )
            )
    if len(set(d.datasets)) != len(d.datasets):
        errors.append(("data.datasets", "a dataset is listed twice"))
    if d.packing and m.stage == "dpo":
        errors.append(("data.packing", "packing applies to sft and pt, not dpo: turn data.packing off"))
    if "none" in spec.output.report_to and len(spec.output.report_to) > 1:
        errors.append(("output.report_to", "'none' cannot be combined with other trackers"))
    if m.lora.targets and "all" in m.lora.targets and len(m.lora.targets) > 1:
        errors.append(
            ("method.lora.targets", "'all' already covers every linear layer: give 'all' alone or a list of names")
        )
    return errors


def spec_warnings(spec: RunSpec) -> list[tuple[str, str]]:
    """Legal but unwise combinations: shown, never blocking."""
    m, t, ln, d = spec.method, spec.train, spec.launch, spec.data
    warns: list[tuple[str, str]] = []
    if ln.backend == "deepspeed" and ln.deepspeed.offload_param != "none":
        warns.append(
            ("launch.deepspeed.offload_param", "parameter offload slows training a lot; try optimizer offload first")
        )
    if ln.backend in ("ddp", "fsdp", "deepspeed") and spec.world_size == 1:
        warns.append(("launch.backend", f"{ln.backend} with one process gains nothing over single"))
    if t.gradient_checkpointing and m.finetuning == "lora" and t.per_device_batch_size == 1 and d.cutoff_len <= 512:
        warns.append(
            ("train.gradient_checkpointing", "on short sequences checkpointing costs ~30% speed and saves little")
        )
    if t.learning_rate > 1e-3 and m.finetuning == "full":
        warns.append(
            ("train.learning_rate", f"{t.learning_rate:g} is high for full fine-tuning (typical: 1e-5 to 5e-5)")
        )
    if m.finetuning == "lora" and t.learning_rate < 1e-5:
        warns.append(("train.learning_rate", f"{t.learning_rate:g} is low for LoRA (typical: 1e-4 to 5e-4)"))
    if m.lora.alpha / max(m.lora.rank, 1) > 8 and m.finetuning == "lora":
        warns.append(("method.lora.alpha", "alpha/rank above 8 scales updates strongly; typical is 1-2"))
    if ln.backend == "single" and ln.device != "cpu" and ln.gpus and len(ln.gpus) > 1:
        warns.append(("launch.gpus", "single-process runs use one GPU; choose ddp, fsdp or deepspeed to use them all"))
    if d.val_size == 0 and t.eval_steps != 500:
        warns.append(("train.eval_steps", "no validation split (data.val_size is 0): eval_steps has no effect"))
    if ln.backend == "deepspeed" and t.optimizer in ("adamw_8bit", "paged_adamw_8bit"):
        warns.append(("train.optimizer", "DeepSpeed uses its own optimizer; the 8-bit optimizer is ignored"))
    if spec.model.trust_remote_code:
        warns.append(("model.trust_remote_code", "the model's own Python code will run: only for models you trust"))
    return warns


# ----------------------------------------------------------------------------------------------- context rules
def read_model_config(name_or_path: str) -> dict | None:
    """The model's config.json when it is a local folder, else None (hub ids are checked at load time)."""
    cfg = _user_path(name_or_path) / "config.json"
    if cfg.is_file():
        try:
            data = json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None
    return None


def _user_path(path: str) -> Path:
    """``~`` expanded; a ``~user`` that does not exist stays literal instead of raising RuntimeError."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)


def resolve_dataset_dir(spec: RunSpec) -> Path:
    if spec.data.dataset_dir:
        return _user_path(spec.data.dataset_dir)
    from engine import workspace

    return workspace.data_dir()


def check_context(spec: RunSpec) -> list[tuple[str, str]]:
    """Rules that read files: the model folder and its config, the dataset registry and columns."""
    errors: list[tuple[str, str]] = []
    mpath = _user_path(spec.model.name_or_path)
    looks_local = spec.model.name_or_path.startswith(("/", ".", "~")) or mpath.exists()
    if looks_local and not mpath.is_dir():
        errors.append(("model.name_or_path", f"no model folder at {spec.model.name_or_path}"))
    elif looks_local and not (mpath / "config.json").is_file():
        errors.append(
            ("model.name_or_path", f"{spec.model.name_or_path} has no config.json: not a transformers model folder")
        )
    cfg = read_model_config(spec.model.name_or_path)
    if cfg:
        max_pos = cfg.get("max_position_embeddings")
        factor = spec.model.rope_scaling.factor if spec.model.rope_scaling else 1.0
        if isinstance(max_pos, int) and spec.data.cutoff_len > max_pos * factor:
            errors.append(
                (
                    "data.cutoff_len",
                    f"{spec.data.cutoff_len} exceeds the model's maximum positions "
                    f"({max_pos}{' x ' + str(factor) if factor != 1 else ''}): lower data.cutoff_len or set "
                    "model.rope_scaling",
                )
            )
        known = ARCH_LINEAR_MODULES.get(str(cfg.get("model_type", "")))
        if known and spec.method.finetuning == "lora":
            bad = [t for t in spec.method.lora.targets if t != "all" and t not in known]
            if bad:
                errors.append(
                    (
                        "method.lora.targets",
                        f"{', '.join(bad)} name no module of a {cfg.get('model_type')} "
                        f"model; its linear modules are {', '.join(known)} (or 'all')",
                    )
                )
        if known and spec.method.finetuning == "freeze":
            bad = [t for t in spec.method.freeze.trainable_modules if t not in known and t not in _LAYER_PARTS]
            if bad:
                errors.append(
                    (
                        "method.freeze.trainable_modules",
                        f"{', '.join(bad)} name no module of a "
                        f"{cfg.get('model_type')} decoder layer; choose from {', '.join(known + _LAYER_PARTS)}",
                    )
                )
            layers = cfg.get("num_hidden_layers")
            if isinstance(layers, int) and spec.method.freeze.trainable_layers > layers:
                errors.append(
                    (
                        "method.freeze.trainable_layers",
                        f"{spec.method.freeze.trainable_layers} trainable layers but the model has {layers}",
                    )
                )
    want = spec.train.resume_from
    if want and want != "last" and not (_user_path(want) / "trainer_state.json").is_file():
        errors.append(
            (
                "train.resume_from",
                f"no checkpoint at {want} (a checkpoint folder holds trainer_state.json); "
                "give a checkpoint-N folder or 'last'",
            )
        )
    errors += _check_datasets(spec)
    return errors


_LAYER_PARTS = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm"]


def _check_datasets(spec: RunSpec) -> list[tuple[str, str]]:
    ddir = resolve_dataset_dir(spec)
    info_path = ddir / "dataset_info.json"
    if not info_path.is_file():
        return [("data.dataset_dir", f"no dataset_info.json in {ddir}")]
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [("data.dataset_dir", f"{info_path} is not valid JSON: {exc}")]
    if not isinstance(info, dict):
        return [("data.dataset_dir", f"{info_path} must map dataset names to entries, got {type(info).__name__}")]
    errors: list[tuple[str, str]] = []
    for name in spec.data.datasets:
        entry = info.get(name)
        if entry is None:
            errors.append(
                ("data.datasets", f"'{name}' is not in {info_path} (known: {', '.join(sorted(info)) or 'none'})")
            )
            continue
        if not isinstance(entry, dict):
            errors.append(("data.datasets", f"'{name}' in {info_path} is not an entry (a JSON object)"))
            continue
        ranking = bool(entry.get("ranking"))
        if spec.method.stage == "dpo" and not ranking:
            errors.append(
                (
                    "data.datasets",
                    f"dpo needs preference pairs, but '{name}' has no chosen/rejected columns "
                    '(set "ranking": true with chosen/rejected in dataset_info.json, or pick another dataset)',
                )
            )
        if spec.method.stage != "dpo" and ranking:
            errors.append(("data.datasets", f"'{name}' holds preference pairs: use stage dpo, or another dataset"))
    return errors


# ----------------------------------------------------------------------------------------------- load / save
class SpecError(Exception):
    """A spec that cannot run. ``problems`` lists (field path, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]], source: str = ""):
        self.problems = problems
        self.source = source
        head = f"invalid run spec{' ' + source if source else ''}:"
        super().__init__("\n".join([head] + [f"  {p}: {m}" for p, m in problems]))


def pydantic_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """Turn a pydantic error into (field path, message) pairs; cross-field messages carry their own paths."""
    out: list[tuple[str, str]] = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", ""))
        if not path and msg.startswith("Value error, "):
            for part in msg[len("Value error, ") :].split("; "):
                fpath, _, fmsg = part.partition(": ")
                out.append((fpath, fmsg))
            continue
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err.get("type") == "extra_forbidden":
            msg = "unknown field (not part of the run spec)"
        out.append((path or "spec", msg))
    return out


def migrate(data: dict) -> dict:
    """Bring a spec dict saved by an earlier schema version up to the current one."""
    version = data.get("schema_version", 1)
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise SpecError(
            [
                (
                    "schema_version",
                    f"schema version {version} was written by a newer Studio (this one reads "
                    f"up to {SCHEMA_VERSION}): upgrade Studio to load it",
                )
            ]
        )
    if not isinstance(version, int) or version < 1:
        raise SpecError(
            [("schema_version", f"unsupported schema version {version!r} (this Studio reads up to {SCHEMA_VERSION})")]
        )
    # Version 1 is the first; later versions add steps here (keep fixtures of old versions in tests/).
    data = dict(data)
    data["schema_version"] = SCHEMA_VERSION
    return data


def parse_spec(data: Any, *, source: str = "", context: bool = False) -> RunSpec:
    """Validate a dict into a RunSpec; raise SpecError listing every problem."""
    if not isinstance(data, dict):
        raise SpecError([("spec", f"expected a mapping of spec groups, got {type(data).__name__}")], source)
    data = migrate(data)
    try:
        spec = RunSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(pydantic_problems(exc), source) from None
    if context:
        problems = check_context(spec)
        if problems:
            raise SpecError(problems, source)
    return spec


def validate_spec(data: Any) -> tuple[RunSpec | None, list[tuple[str, str]], list[tuple[str, str]]]:
    """(spec or None, errors, warnings), running field, cross-field and context rules. Never raises on bad input."""
    try:
        spec = parse_spec(data)
    except SpecError as exc:
        return None, exc.problems, []
    errors = check_context(spec)
    return (spec if not errors else None), errors, spec_warnings(spec)


def load_spec(path: str | Path, *, context: bool = True) -> RunSpec:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([("spec", f"cannot read {path}: {exc.strerror or exc}")], str(path)) from None
    except yaml.YAMLError as exc:
        raise SpecError([("spec", f"{path} is not valid YAML: {exc}")], str(path)) from None
    return parse_spec(data, source=str(path), context=context)


def spec_to_dict(spec: RunSpec) -> dict:
    return spec.model_dump(mode="json")


def dump_spec(spec: RunSpec) -> str:
    return yaml.safe_dump(spec_to_dict(spec), sort_keys=False, allow_unicode=True)


def save_spec(spec: RunSpec, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(dump_spec(spec), encoding="utf-8")
    tmp.replace(path)
    return path
