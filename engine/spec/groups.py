"""The run spec's groups for what is trained: model, method, data, train. Light: pydantic only.

Each field carries its description, default, range or choices, and ``json_schema_extra`` (label, label_zh, group,
advanced, step) from which the page builds its widgets. Assembled into ``RunSpec`` by ``engine.spec.schema``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.spec.grpo import GrpoSpec


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


class VisionSpec(_Spec):
    """A vision-language model's parts and image sizes (LLaMA-Factory's switches of the same names)."""

    freeze_vision_tower: bool = Field(
        True,
        description="Keep the vision tower (the image encoder) frozen",
        json_schema_extra=_meta("Freeze vision tower", advanced=True, label_zh="冻结视觉塔"),
    )
    freeze_multi_modal_projector: bool = Field(
        True,
        description="Keep the multimodal projector (image features to the language model) frozen",
        json_schema_extra=_meta("Freeze projector", advanced=True, label_zh="冻结多模态投影层"),
    )
    freeze_language_model: bool = Field(
        False,
        description="Keep the language model frozen (train only the unfrozen vision parts)",
        json_schema_extra=_meta("Freeze language model", advanced=True, label_zh="冻结语言模型"),
    )
    image_max_pixels: int = Field(
        768 * 768,
        ge=16,
        description="Larger images are shrunk to this many pixels before the processor (aspect kept)",
        json_schema_extra=_meta("Image max pixels", advanced=True, label_zh="图像最大像素数"),
    )
    image_min_pixels: int = Field(
        32 * 32,
        ge=1,
        description="Smaller images are enlarged to this many pixels before the processor (aspect kept)",
        json_schema_extra=_meta("Image min pixels", advanced=True, label_zh="图像最小像素数"),
    )


class ModelSpec(_Spec):
    name_or_path: str = Field(
        ...,
        min_length=1,
        description="Local model folder, Hugging Face hub id (org/name, optionally org/name@revision) or a model "
        "in the Hugging Face cache",
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
    packed_attention: Literal["auto", "per_sample", "mask"] = Field(
        "auto",
        description="How sdpa attends inside rows that hold several samples (padding-free or packed batches): "
        "per_sample runs attention on each sample's own tokens; mask computes the whole row under a block-diagonal "
        "mask, keeping a row x row bias per layer. The same results. auto: per_sample on the CPU, mask on GPUs "
        "(per-sample speed not yet measured there; the plan counts the bias). flash_attention_2 attends per sample "
        "by itself",
        json_schema_extra=_meta("Attention in packed rows", advanced=True, label_zh="多样本行的注意力"),
    )
    rope_scaling: RopeScalingSpec | None = Field(
        None,
        description="Extend the context with RoPE scaling (empty: off)",
        json_schema_extra=_meta("RoPE scaling", advanced=True, label_zh="RoPE 缩放"),
    )
    vision: VisionSpec = Field(default_factory=VisionSpec)  # read only for vision-language models

    @model_validator(mode="before")
    @classmethod
    def _revision_from_name(cls, data: Any) -> Any:
        """``org/name@rev`` (as hub users write it) is the hub id ``org/name`` at revision ``rev``."""
        if isinstance(data, dict) and isinstance(data.get("name_or_path"), str):
            from engine.models.resolve import split_revision

            name, rev = split_revision(data["name_or_path"])
            if rev is not None and data.get("revision", "main") in ("main", None, rev):
                data = {**data, "name_or_path": name, "revision": rev}
        return data


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
        json_schema_extra=_meta("rsLoRA", label_zh="rsLoRA"),
    )
    use_dora: bool = Field(
        False,
        description="Weight-decomposed LoRA (DoRA)",
        json_schema_extra=_meta("DoRA", label_zh="DoRA"),
    )
    loraplus_lr_ratio: float | None = Field(
        None,
        gt=0,
        le=1000,
        description="LoRA+: the B matrices learn at learning rate x this ratio (empty: off; the LoRA+ paper uses 16)",
        json_schema_extra=_meta("LoRA+ LR ratio", label_zh="LoRA+ 学习率倍数"),
    )
    loraplus_lr_embedding: float = Field(
        1e-6,
        gt=0,
        le=1.0,
        description="LoRA+: learning rate of LoRA layers on embeddings",
        json_schema_extra=_meta("LoRA+ embedding LR", advanced=True, label_zh="LoRA+ 嵌入层学习率", step=1e-7),
    )
    pissa_init: bool = Field(
        False,
        description="PiSSA: start the adapter from the principal singular vectors of each weight (the base keeps the "
        "rest) instead of B = 0; converges faster than plain LoRA",
        json_schema_extra=_meta("PiSSA initialisation", label_zh="PiSSA 初始化"),
    )
    pissa_iter: int = Field(
        16,
        ge=-1,
        le=1024,
        description="PiSSA: iterations of the fast SVD (-1: exact SVD, slower)",
        json_schema_extra=_meta("PiSSA SVD iterations", advanced=True, label_zh="PiSSA SVD 迭代次数"),
    )
    pissa_convert: bool = Field(
        False,
        description="PiSSA: save the trained adapter converted to a plain LoRA adapter that applies to the original "
        "base model (the PiSSA adapter needs the modified base otherwise)",
        json_schema_extra=_meta("Save PiSSA as LoRA", advanced=True, label_zh="PiSSA 转为 LoRA 保存"),
    )


class OftSpec(_Spec):
    rank: int = Field(
        0,
        ge=0,
        le=4096,
        description="OFT rank: orthogonal blocks per layer (0: set by the block size; give one of the two)",
        json_schema_extra=_meta("OFT rank", label_zh="OFT 秩"),
    )
    block_size: int = Field(
        32,
        ge=0,
        le=4096,
        description="OFT block size: each layer's input dimension is split into orthogonal blocks of this size "
        "(0: set by the rank; it must divide the layers' input sizes)",
        json_schema_extra=_meta("OFT block size", label_zh="OFT 块大小"),
    )
    targets: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        description="Module names to adapt (e.g. q_proj, v_proj), or 'all' for every linear layer",
        json_schema_extra=_meta("OFT targets", label_zh="OFT 作用模块"),
    )
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="OFT module dropout (drops whole blocks while training)",
        json_schema_extra=_meta("OFT dropout", advanced=True, label_zh="OFT 丢弃率"),
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
    loss_type: Literal["sigmoid", "hinge", "ipo", "orpo", "simpo"] = Field(
        "sigmoid",
        description="Preference loss: sigmoid, hinge, ipo (DPO with a reference model); orpo (TRL's ORPOTrainer: "
        "odds ratio + NLL, no reference); simpo (TRL's CPOTrainer, loss_type simpo: length-normalised margin with "
        "simpo_gamma, no reference) - LLaMA-Factory's pref_loss",
        json_schema_extra=_meta("DPO loss", advanced=True, label_zh="DPO 损失"),
    )
    simpo_gamma: float = Field(
        0.5,
        ge=0,
        le=100,
        description="SimPO's target reward margin (LLaMA-Factory's simpo_gamma)",
        json_schema_extra=_meta("SimPO gamma", advanced=True, label_zh="SimPO gamma"),
    )
    ftx: float = Field(
        0.0,
        ge=0,
        le=100,
        description="Weight of the SFT (NLL) loss on chosen answers added to SimPO (LLaMA-Factory's pref_ftx; TRL's "
        "cpo_alpha); ORPO has its NLL term built in",
        json_schema_extra=_meta("SFT loss weight", advanced=True, label_zh="SFT 损失权重"),
    )


class KtoSpec(_Spec):
    beta: float = Field(
        0.1,
        gt=0,
        le=10,
        description="KTO beta: how far the model may move from its reference (higher: less)",
        json_schema_extra=_meta("KTO beta", label_zh="KTO beta"),
    )
    desirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Weight of the loss on desirable answers (kto_tag true); raise it when they are the fewer",
        json_schema_extra=_meta("Desirable weight", advanced=True, label_zh="正样本权重"),
    )
    undesirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Weight of the loss on undesirable answers (kto_tag false); raise it when they are the fewer",
        json_schema_extra=_meta("Undesirable weight", advanced=True, label_zh="负样本权重"),
    )


class MethodSpec(_Spec):
    stage: Literal["sft", "pt", "dpo", "kto", "rm", "grpo"] = Field(
        "sft",
        description="sft: supervised fine-tuning; pt: continued pre-training on text; dpo: preference pairs; kto: "
        "answers each tagged desirable or not (kto_tag); rm: a reward model (a score head) trained on preference "
        "pairs; grpo: reinforcement learning on prompts, scored by reward functions (method.grpo)",
        json_schema_extra=_meta("Stage", label_zh="训练阶段"),
    )
    finetuning: Literal["lora", "oft", "full", "freeze"] = Field(
        "lora",
        description="lora: train adapters (QLoRA with quantization); oft: orthogonal fine-tuning adapters; full: "
        "every weight; freeze: last layers",
        json_schema_extra=_meta("Method", label_zh="微调方法"),
    )
    lora: LoraSpec = Field(default_factory=LoraSpec)
    oft: OftSpec = Field(default_factory=OftSpec)
    freeze: FreezeSpec = Field(default_factory=FreezeSpec)
    quantization: QuantSpec = Field(default_factory=QuantSpec)
    dpo: DpoSpec = Field(default_factory=DpoSpec)
    kto: KtoSpec = Field(default_factory=KtoSpec)
    grpo: GrpoSpec = Field(default_factory=GrpoSpec)

    @property
    def adapter(self) -> bool:
        """lora and oft train a PEFT adapter (saved as adapter/); full and freeze train the model's own weights."""
        return self.finetuning in ADAPTER_METHODS


ADAPTER_METHODS = ("lora", "oft")


# ----------------------------------------------------------------------------------------------- data
MAX_DATASET_NAME = 100  # characters of a dataset name (registry key): longer ones are refused, naming the field
DatasetName = Annotated[str, Field(max_length=MAX_DATASET_NAME)]


class DataSpec(_Spec):
    datasets: list[DatasetName] = Field(
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
        description="Chat template: auto (the tokenizer's own, else default), or a LLaMA-Factory template name "
        "rendered as LLaMA-Factory does (llama3, llama2, qwen, qwen3, qwen3_nothink, gemma, mistral, glm4, chatml, "
        "alpaca, default, empty, ...)",
        json_schema_extra=_meta("Template", label_zh="对话模板"),
    )
    cutoff_len: int = Field(
        1024,
        ge=8,
        le=1_048_576,
        description="Maximum tokens per sample; longer samples are truncated (stage pt: texts are cut into blocks "
        "of this length instead, no token lost)",
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
        le=10_000_000,
        description="Rows held out for evaluation, as LLaMA-Factory reads val_size: a fraction below 1 (0.1: a "
        "tenth), or a whole number of rows from 1 up (0: no evaluation)",
        json_schema_extra=_meta("Validation size", label_zh="验证集大小"),
    )
    eval_datasets: list[DatasetName] = Field(
        default_factory=list,
        description="Separate evaluation datasets from the registry (LLaMA-Factory's eval_dataset), evaluated at "
        "the eval strategy instead of a split of the training data (empty: none)",
        json_schema_extra=_meta("Evaluation datasets", advanced=True, label_zh="评估数据集"),
    )
    packing: bool = Field(
        False,
        description="Pack several samples per row with no attention across them (faster on short data). Stage pt: "
        "join the texts end to end and cut full blocks (attention spans texts, EOS between them; the last partial "
        "block is dropped); off, each text is cut into blocks on its own",
        json_schema_extra=_meta("Packing", label_zh="序列打包"),
    )
    padding_free: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Padding-free batches: a step's samples joined in one row with positions restarting per sample "
        "and no attention across them (the same samples and loss as padded batches, no compute on pad tokens). auto: "
        "on for sft and pt without packing; dpo only with flash_attention_2; never for kto and rm",
        json_schema_extra=_meta("Padding-free batches", advanced=True, label_zh="无填充批次"),
    )
    group_by_length: bool = Field(
        False,
        description="Batch samples of similar length together: less padding, a less random order (sft, pt; "
        "not with packing; not dpo, kto or rm)",
        json_schema_extra=_meta("Group by length", advanced=True, label_zh="按长度分组"),
    )
    train_on_prompt: bool = Field(
        False,
        description="Also compute the loss on prompt tokens",
        json_schema_extra=_meta("Train on prompt", advanced=True, label_zh="训练提示词"),
    )
    mask_history: bool = Field(
        False,
        description="Train only the last assistant turn of each conversation; earlier answers are context (sft; "
        "a sample over the cutoff keeps its last turns)",
        json_schema_extra=_meta("Mask history", advanced=True, label_zh="屏蔽历史轮次"),
    )
    enable_thinking: bool = Field(
        True,
        description="Reasoning templates (qwen3, deepseekr1, ...): on, an answer without a thought gets an empty "
        "<think> block, trained; off, thoughts are removed and the empty block goes into the prompt",
        json_schema_extra=_meta("Enable thinking", advanced=True, label_zh="启用思考"),
    )
    tool_format: Literal["template", "default", "qwen", "llama3", "glm4", "mistral"] = Field(
        "template",
        description="How tools and tool calls are written: the named template's own format, or another one "
        "(LLaMA-Factory's tool_format)",
        json_schema_extra=_meta("Tool format", advanced=True, label_zh="工具格式"),
    )
    preprocessing_workers: int = Field(
        1,
        ge=1,
        le=256,
        description="Processes for tokenisation",
        json_schema_extra=_meta("Preprocessing workers", advanced=True, label_zh="预处理进程数"),
    )
    dataloader_workers: int = Field(
        0,
        ge=0,
        le=64,
        description="Worker processes that load batches during training (0: in the training process)",
        json_schema_extra=_meta("Data loader workers", advanced=True, label_zh="数据加载进程数"),
    )


# ----------------------------------------------------------------------------------------------- train
LOW_RANK_OPTIMIZERS = ("galore_adamw", "galore_adamw_8bit", "galore_adafactor", "apollo_adamw")


class LowRankOptimSpec(_Spec):
    """GaLore / APOLLO: settings of transformers' low-rank optimizers (``optim_target_modules``, ``optim_args``)."""

    targets: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        description="GaLore / APOLLO: linear modules whose gradients are projected (e.g. q_proj, v_proj), or 'all' "
        "for every linear layer of the decoder",
        json_schema_extra=_meta("Projected modules", label_zh="投影模块"),
    )
    rank: int = Field(
        16,
        ge=1,
        le=65536,
        description="GaLore / APOLLO: rank of the projected gradients",
        json_schema_extra=_meta("Projection rank", label_zh="投影秩"),
    )
    update_interval: int = Field(
        200,
        ge=1,
        le=10_000_000,
        description="GaLore / APOLLO: steps between updates of the projection",
        json_schema_extra=_meta("Projection update interval", label_zh="投影更新间隔"),
    )
    scale: float | None = Field(
        None,
        gt=0,
        le=1e4,
        description="GaLore / APOLLO: scale of the projected update (empty: 2 for GaLore, 32 for APOLLO, "
        "LLaMA-Factory's defaults)",
        json_schema_extra=_meta("Projection scale", label_zh="投影缩放"),
    )
    proj_type: Literal["std", "reverse_std", "right", "left", "full"] = Field(
        "std",
        description="GaLore / APOLLO: which side is projected (APOLLO takes std, right or left)",
        json_schema_extra=_meta("Projection type", label_zh="投影类型"),
    )
    apollo_proj: Literal["random", "svd"] = Field(
        "random",
        description="APOLLO: random or SVD projection",
        json_schema_extra=_meta("APOLLO projection", label_zh="APOLLO 投影"),
    )
    apollo_scale_type: Literal["channel", "tensor"] = Field(
        "channel",
        description="APOLLO: scale per channel or per tensor",
        json_schema_extra=_meta("APOLLO scale type", label_zh="APOLLO 缩放类型"),
    )
    layerwise: bool = Field(
        False,
        description="GaLore / APOLLO: update layer by layer during backward (less memory; one process only, no "
        "gradient accumulation)",
        json_schema_extra=_meta("Layer-wise update", label_zh="逐层更新"),
    )


class BadamSpec(_Spec):
    mode: Literal["layer", "ratio"] = Field(
        "layer",
        description="BAdam: update one block of layers at a time (layer) or a fraction of every weight (ratio)",
        json_schema_extra=_meta("BAdam mode", label_zh="BAdam 模式"),
    )
    start_block: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="BAdam layer mode: the block trained first (empty: the first)",
        json_schema_extra=_meta("BAdam start block", label_zh="BAdam 起始块"),
    )
    switch_mode: Literal["ascending", "descending", "random", "fixed"] = Field(
        "ascending",
        description="BAdam layer mode: the order in which blocks take turns",
        json_schema_extra=_meta("BAdam switch mode", label_zh="BAdam 切换方式"),
    )
    switch_interval: int = Field(
        50,
        ge=-1,
        le=10_000_000,
        description="BAdam layer mode: steps before the next block (-1: never switch)",
        json_schema_extra=_meta("BAdam switch interval", label_zh="BAdam 切换间隔"),
    )
    update_ratio: float = Field(
        0.05,
        gt=0,
        le=1.0,
        description="BAdam ratio mode: fraction of each weight updated",
        json_schema_extra=_meta("BAdam update ratio", label_zh="BAdam 更新比例"),
    )
    mask_mode: Literal["adjacent", "scatter"] = Field(
        "adjacent",
        description="BAdam ratio mode: the updated entries are adjacent or scattered",
        json_schema_extra=_meta("BAdam mask mode", label_zh="BAdam 掩码方式"),
    )
    verbose: int = Field(
        0,
        ge=0,
        le=2,
        description="BAdam: 0 quiet, 1 print the block, 2 print the trainable parameters",
        json_schema_extra=_meta("BAdam verbosity", label_zh="BAdam 输出级别"),
    )


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
        json_schema_extra=_meta("Optimizer", advanced=True, label_zh="优化器"),
    )
    low_rank: LowRankOptimSpec = Field(default_factory=lambda: LowRankOptimSpec())
    badam: BadamSpec = Field(default_factory=lambda: BadamSpec())
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
    liger_kernel: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Liger kernels on CUDA (fused linear cross-entropy: the logits are never materialised; RMSNorm, "
        "RoPE, SwiGLU): auto uses them where the liger-kernel package is installed and the architecture is "
        "supported; refused on CPU",
        json_schema_extra=_meta("Liger kernels", advanced=True, label_zh="Liger 融合算子"),
    )
    trained_logits_only: bool = Field(
        True,
        description="Compute the output layer and the loss only at the positions whose next token is trained "
        "(prompt and pad positions skipped): the same loss with less time and memory. Used for sft where the "
        "model's forward supports it (transformers' logits_to_keep) and Liger kernels are off",
        json_schema_extra=_meta("Logits on trained tokens only", advanced=True, label_zh="仅对训练词元计算 logits"),
    )
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        "auto",
        description="Mixed precision: auto picks bf16 where the GPU has it, else fp16; fp32 on CPU",
        json_schema_extra=_meta("Precision", label_zh="计算精度"),
    )
    gradient_checkpointing: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Recompute activations in backward: less memory, ~30% slower. auto: off when the memory plan "
        "fits the GPUs with a 10% margin, on otherwise (true / false are on / off)",
        json_schema_extra=_meta("Gradient checkpointing", label_zh="梯度检查点"),
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
    save_strategy: Literal["steps", "epoch", "best", "no"] = Field(
        "steps",
        description="When to save checkpoints: every save steps, every epoch, when the evaluation loss improves "
        "(best; needs a validation split), or never (the final model is saved anyway)",
        json_schema_extra=_meta("Save strategy", advanced=True, label_zh="保存策略"),
    )
    save_only_model: bool = Field(
        False,
        description="Checkpoints hold the weights only (no optimizer or scheduler state): smaller, but a run cannot "
        "resume from them",
        json_schema_extra=_meta("Save only the model", advanced=True, label_zh="仅保存模型"),
    )
    eval_strategy: Literal["steps", "epoch", "no"] = Field(
        "steps",
        description="When to evaluate on the validation split: every eval steps, every epoch, or never",
        json_schema_extra=_meta("Eval strategy", advanced=True, label_zh="评估策略"),
    )
    per_device_eval_batch_size: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="Samples per device per evaluation step (empty: the training batch size)",
        json_schema_extra=_meta("Eval batch size per device", advanced=True, label_zh="每卡评估批大小"),
    )
    neftune_noise_alpha: float | None = Field(
        None,
        gt=0,
        le=100,
        description="NEFTune: add noise of this scale to the input embeddings while training (empty: off; typical 5)",
        json_schema_extra=_meta("NEFTune noise alpha", advanced=True, label_zh="NEFTune 噪声系数"),
    )
    count_input_tokens: Literal["non_padding", "all", "no"] = Field(
        "non_padding",
        description="Count the input tokens seen (for tokens/s and the token total): non_padding, all (padding "
        "too), or no",
        json_schema_extra=_meta("Count input tokens", advanced=True, label_zh="统计输入 token"),
    )
    extra_args: dict[str, Any] = Field(
        default_factory=dict,
        description="More Hugging Face TrainingArguments, passed to the Trainer as given (YAML or JSON mapping, "
        "e.g. {adam_beta2: 0.95}); only fields of the installed transformers that no other setting covers",
        json_schema_extra=_meta("Extra training arguments", advanced=True, label_zh="其他训练参数"),
    )
