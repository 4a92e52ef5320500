"""The run spec's ``method`` group: what is trained and how - the stage (sft, pt, dpo, kto, rm, grpo), the finetuning
method (lora, oft, full, freeze) and each one's settings (LoRA, OFT, freeze, quantization, DPO, KTO; GRPO's are
``engine.spec.grpo_group``). Light: pydantic and engine.spec.groups / grpo only. Assembled into ``RunSpec`` by
``engine.spec.schema``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.spec.groups import _meta, _Spec
from engine.spec.grpo_group import GrpoSpec


class LoraSpec(_Spec):
    rank: int = Field(8, ge=1, le=1024, description="LoRA rank r", json_schema_extra=_meta("LoRA rank"))
    alpha: float = Field(
        16.0,
        gt=0,
        le=4096,
        description="LoRA alpha (scale = alpha / rank, or alpha / sqrt(rank) with rsLoRA)",
        json_schema_extra=_meta("LoRA alpha"),
    )
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Dropout on the LoRA input",
        json_schema_extra=_meta("LoRA dropout"),
    )
    targets: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        description="Module names to adapt (e.g. q_proj, v_proj), or 'all' for every linear layer",
        json_schema_extra=_meta("LoRA targets"),
    )
    use_rslora: bool = Field(
        False,
        description="Rank-stabilised LoRA scaling",
        json_schema_extra=_meta("rsLoRA"),
    )
    use_dora: bool = Field(
        False,
        description="Weight-decomposed LoRA (DoRA)",
        json_schema_extra=_meta("DoRA"),
    )
    loraplus_lr_ratio: float | None = Field(
        None,
        gt=0,
        le=1000,
        description="LoRA+: the B matrices learn at learning rate x this ratio (empty: off; the LoRA+ paper uses 16)",
        json_schema_extra=_meta("LoRA+ LR ratio"),
    )
    loraplus_lr_embedding: float = Field(
        1e-6,
        gt=0,
        le=1.0,
        description="LoRA+: learning rate of LoRA layers on embeddings",
        json_schema_extra=_meta("LoRA+ embedding LR", advanced=True, step=1e-7),
    )
    pissa_init: bool = Field(
        False,
        description="PiSSA: start the adapter from the principal singular vectors of each weight (the base keeps the "
        "rest) instead of B = 0; converges faster than plain LoRA",
        json_schema_extra=_meta("PiSSA initialisation"),
    )
    pissa_iter: int = Field(
        16,
        ge=-1,
        le=1024,
        description="PiSSA: iterations of the fast SVD (-1: exact SVD, slower)",
        json_schema_extra=_meta("PiSSA SVD iterations", advanced=True),
    )
    pissa_convert: bool = Field(
        False,
        description="PiSSA: save the trained adapter converted to a plain LoRA adapter that applies to the original "
        "base model (the PiSSA adapter needs the modified base otherwise)",
        json_schema_extra=_meta("Save PiSSA as LoRA", advanced=True),
    )


class OftSpec(_Spec):
    rank: int = Field(
        0,
        ge=0,
        le=4096,
        description="OFT rank: orthogonal blocks per layer (0: set by the block size; give one of the two)",
        json_schema_extra=_meta("OFT rank"),
    )
    block_size: int = Field(
        32,
        ge=0,
        le=4096,
        description="OFT block size: each layer's input dimension is split into orthogonal blocks of this size "
        "(0: set by the rank; it must divide the layers' input sizes)",
        json_schema_extra=_meta("OFT block size"),
    )
    targets: list[str] = Field(
        default_factory=lambda: ["all"],
        min_length=1,
        description="Module names to adapt (e.g. q_proj, v_proj), or 'all' for every linear layer",
        json_schema_extra=_meta("OFT targets"),
    )
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="OFT module dropout (drops whole blocks while training)",
        json_schema_extra=_meta("OFT dropout", advanced=True),
    )


class FreezeSpec(_Spec):
    trainable_layers: int = Field(
        2,
        ge=1,
        le=1024,
        description="Train the last N decoder layers (the rest stay frozen)",
        json_schema_extra=_meta("Trainable layers"),
    )
    trainable_modules: list[str] = Field(
        default_factory=list,
        description="Only these module names inside the trainable layers (empty: every module of those layers)",
        json_schema_extra=_meta("Trainable modules", advanced=True),
    )
    extra_modules: list[str] = Field(
        default_factory=list,
        description="Extra modules to train outside the layers, e.g. lm_head, embed_tokens",
        json_schema_extra=_meta("Extra trainable modules", advanced=True),
    )
    use_llama_pro: bool = Field(
        False,
        description="LLaMA Pro: train the blocks `studio expand-model` inserted (one every layers / trainable_layers "
        "layers; trainable_layers = its --num-expand) instead of the last layers",
        json_schema_extra=_meta("LLaMA Pro blocks", advanced=True),
    )


class QuantSpec(_Spec):
    bits: Literal[0, 4, 8] = Field(
        0,
        description="Load the base in 4 or 8 bit with bitsandbytes (QLoRA, or quantized OFT); 0 = off",
        json_schema_extra=_meta("Quantization bits"),
    )
    quant_type: Literal["nf4", "fp4"] = Field(
        "nf4", description="4-bit data type", json_schema_extra=_meta("4-bit type", advanced=True)
    )
    double_quant: bool = Field(
        True,
        description="Quantize the quantization constants too (saves ~0.4 bit/param)",
        json_schema_extra=_meta("Double quantization", advanced=True),
    )
    compute_dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="dtype of the matmuls on dequantized weights (auto: from precision)",
        json_schema_extra=_meta("Compute dtype", advanced=True),
    )


class DpoSpec(_Spec):
    beta: float = Field(0.1, gt=0, le=10, description="DPO temperature beta", json_schema_extra=_meta("DPO beta"))
    loss_type: Literal["sigmoid", "hinge", "ipo", "orpo", "simpo"] = Field(
        "sigmoid",
        description="Preference loss: sigmoid, hinge, ipo (DPO with a reference model); orpo (TRL's ORPOTrainer: "
        "odds ratio + NLL, no reference); simpo (TRL's CPOTrainer, loss_type simpo: length-normalised margin with "
        "simpo_gamma, no reference) - LLaMA-Factory's pref_loss",
        json_schema_extra=_meta("DPO loss", advanced=True),
    )
    simpo_gamma: float = Field(
        0.5,
        ge=0,
        le=100,
        description="SimPO's target reward margin (LLaMA-Factory's simpo_gamma)",
        json_schema_extra=_meta("SimPO gamma", advanced=True),
    )
    ftx: float = Field(
        0.0,
        ge=0,
        le=100,
        description="Weight of the SFT (NLL) loss on chosen answers added to SimPO (LLaMA-Factory's pref_ftx; TRL's "
        "cpo_alpha); ORPO has its NLL term built in",
        json_schema_extra=_meta("SFT loss weight", advanced=True),
    )


class KtoSpec(_Spec):
    beta: float = Field(
        0.1,
        gt=0,
        le=10,
        description="KTO beta: how far the model may move from its reference (higher: less)",
        json_schema_extra=_meta("KTO beta"),
    )
    desirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Weight of the loss on desirable answers (kto_tag true); raise it when they are the fewer",
        json_schema_extra=_meta("Desirable weight", advanced=True),
    )
    undesirable_weight: float = Field(
        1.0,
        gt=0,
        le=100,
        description="Weight of the loss on undesirable answers (kto_tag false); raise it when they are the fewer",
        json_schema_extra=_meta("Undesirable weight", advanced=True),
    )


class MethodSpec(_Spec):
    stage: Literal["sft", "pt", "dpo", "kto", "rm", "grpo"] = Field(
        "sft",
        description="sft: supervised fine-tuning; pt: continued pre-training on text; dpo: preference pairs; kto: "
        "answers each tagged desirable or not (kto_tag); rm: a reward model (a score head) trained on preference "
        "pairs; grpo: reinforcement learning on prompts, scored by reward functions (method.grpo)",
        json_schema_extra=_meta("Stage"),
    )
    finetuning: Literal["lora", "oft", "full", "freeze"] = Field(
        "lora",
        description="lora: train adapters (QLoRA with quantization); oft: orthogonal fine-tuning adapters; full: "
        "every weight; freeze: last layers",
        json_schema_extra=_meta("Method"),
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
