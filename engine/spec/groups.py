"""The run spec's groups for what is trained on: model and data; and the base every group of the spec is built on
(``_Spec``: pydantic, ``extra="forbid"``; ``_meta``: a field's page metadata). Light: pydantic only.

Each field carries its description, default, range or choices, and ``json_schema_extra`` (label, group,
advanced, step) from which the page builds its widgets. The other groups: ``engine.spec.method`` (method),
``engine.spec.train_group`` (train), ``engine.spec.launch_group`` (launch, output), ``engine.spec.watch_group``
(health, notify). Assembled into ``RunSpec`` by ``engine.spec.schema``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


def _meta(label: str, *, group: str = "", advanced: bool = False, **extra: Any) -> dict:
    return {"label": label, "group": group, "advanced": advanced, **extra}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


# ----------------------------------------------------------------------------------------------- model
class RopeScalingSpec(_Spec):
    type: Literal["linear", "dynamic", "yarn", "llama3"] = Field(
        "linear", description="RoPE scaling method", json_schema_extra=_meta("RoPE scaling")
    )
    factor: float = Field(
        2.0,
        ge=1.0,
        le=64.0,
        description="Context length multiplier",
        json_schema_extra=_meta("RoPE factor"),
    )


class VisionSpec(_Spec):
    """A vision-language model's parts and image sizes (LLaMA-Factory's switches of the same names)."""

    freeze_vision_tower: bool = Field(
        True,
        description="Keep the vision tower (the image encoder) frozen",
        json_schema_extra=_meta("Freeze vision tower", advanced=True),
    )
    freeze_multi_modal_projector: bool = Field(
        True,
        description="Keep the multimodal projector (image features to the language model) frozen",
        json_schema_extra=_meta("Freeze projector", advanced=True),
    )
    freeze_language_model: bool = Field(
        False,
        description="Keep the language model frozen (train only the unfrozen vision parts)",
        json_schema_extra=_meta("Freeze language model", advanced=True),
    )
    image_max_pixels: int = Field(
        768 * 768,
        ge=16,
        description="Larger images are shrunk to this many pixels before the processor (aspect kept)",
        json_schema_extra=_meta("Image max pixels", advanced=True),
    )
    image_min_pixels: int = Field(
        32 * 32,
        ge=1,
        description="Smaller images are enlarged to this many pixels before the processor (aspect kept)",
        json_schema_extra=_meta("Image min pixels", advanced=True),
    )


class ModelSpec(_Spec):
    name_or_path: str = Field(
        ...,
        min_length=1,
        description="Local model folder, Hugging Face hub id (org/name, optionally org/name@revision) or a model "
        "in the Hugging Face cache",
        json_schema_extra=_meta("Model"),
    )
    revision: str = Field(
        "main",
        min_length=1,
        description="Hub revision (branch, tag or commit); ignored for local folders",
        json_schema_extra=_meta("Revision", advanced=True),
    )
    hub: Literal["huggingface", "modelscope"] = Field(
        "huggingface",
        description="Where a model id is downloaded from: the Hugging Face hub (or the mirror HF_ENDPOINT names) or "
        "ModelScope (LLaMA-Factory's use_modelscope_hub; MODELSCOPE_ENDPOINT, cache MODELSCOPE_CACHE). Ignored "
        "for local folders",
        json_schema_extra=_meta("Model hub", advanced=True),
    )
    trust_remote_code: bool = Field(
        False,
        description="Run Python code shipped with the model. Only for models you trust.",
        json_schema_extra=_meta("Trust remote code", advanced=True),
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto",
        description="dtype the base weights are loaded in (auto: from precision)",
        json_schema_extra=_meta("Weights dtype", advanced=True),
    )
    attn_implementation: Literal["sdpa", "eager", "flash_attention_2"] = Field(
        "sdpa",
        description="Attention kernel: sdpa (PyTorch), eager, or flash_attention_2 (CUDA, fp16/bf16)",
        json_schema_extra=_meta("Attention", advanced=True),
    )
    packed_attention: Literal["auto", "per_sample", "mask"] = Field(
        "auto",
        description="How sdpa attends inside rows that hold several samples (padding-free or packed batches): "
        "per_sample runs attention on each sample's own tokens; mask computes the whole row under a block-diagonal "
        "mask, keeping a row x row bias per layer. The same results. auto: per_sample on the CPU, mask on GPUs "
        "(per-sample speed not yet measured there; the plan counts the bias). flash_attention_2 attends per sample "
        "by itself",
        json_schema_extra=_meta("Attention in packed rows", advanced=True),
    )
    rope_scaling: RopeScalingSpec | None = Field(
        None,
        description="Extend the context with RoPE scaling (empty: off)",
        json_schema_extra=_meta("RoPE scaling", advanced=True),
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


# ----------------------------------------------------------------------------------------------- data
MAX_DATASET_NAME = 100  # characters of a dataset name (registry key): longer ones are refused, naming the field
DatasetName = Annotated[str, Field(max_length=MAX_DATASET_NAME)]


class DataSpec(_Spec):
    datasets: list[DatasetName] = Field(
        ...,
        min_length=1,
        description="Dataset names from the registry (dataset_info.json); several are mixed",
        json_schema_extra=_meta("Datasets"),
    )
    dataset_dir: str = Field(
        "",
        description="Folder holding dataset_info.json (empty: the workspace's data folder)",
        json_schema_extra=_meta("Dataset folder", advanced=True),
    )
    mix: Literal["concat", "interleave_under", "interleave_over"] = Field(
        "concat",
        description="How several datasets are combined: concatenate, or interleave (stop at the "
        "shortest / oversample to the longest)",
        json_schema_extra=_meta("Mixing", advanced=True),
    )
    mix_probs: list[float] | None = Field(
        None,
        description="Sampling probabilities for interleaving, one per dataset (empty: equal)",
        json_schema_extra=_meta("Mixing probabilities", advanced=True),
    )
    template: str = Field(
        "auto",
        min_length=1,
        description="Chat template: auto (the tokenizer's own, else default), or a LLaMA-Factory template name "
        "rendered as LLaMA-Factory does (llama3, llama2, qwen, qwen3, qwen3_nothink, gemma, mistral, glm4, chatml, "
        "alpaca, default, empty, ...)",
        json_schema_extra=_meta("Template"),
    )
    cutoff_len: int = Field(
        1024,
        ge=8,
        le=1_048_576,
        description="Maximum tokens per sample; longer samples are truncated (stage pt: texts are cut into blocks "
        "of this length instead, no token lost)",
        json_schema_extra=_meta("Cutoff length"),
    )
    max_samples: int | None = Field(
        None,
        ge=1,
        description="Use at most this many rows per dataset (empty: all)",
        json_schema_extra=_meta("Max samples"),
    )
    val_size: float = Field(
        0.0,
        ge=0.0,
        le=10_000_000,
        description="Rows held out for evaluation, as LLaMA-Factory reads val_size: a fraction below 1 (0.1: a "
        "tenth), or a whole number of rows from 1 up (0: no evaluation)",
        json_schema_extra=_meta("Validation size"),
    )
    eval_datasets: list[DatasetName] = Field(
        default_factory=list,
        description="Separate evaluation datasets from the registry (LLaMA-Factory's eval_dataset), evaluated at "
        "the eval strategy instead of a split of the training data (empty: none)",
        json_schema_extra=_meta("Evaluation datasets", advanced=True),
    )
    packing: bool = Field(
        False,
        description="Pack several samples per row with no attention across them (faster on short data). Stage pt: "
        "join the texts end to end and cut full blocks (attention spans texts, EOS between them; the last partial "
        "block is dropped); off, each text is cut into blocks on its own",
        json_schema_extra=_meta("Packing"),
    )
    padding_free: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Padding-free batches: a step's samples joined in one row with positions restarting per sample "
        "and no attention across them (the same samples and loss as padded batches, no compute on pad tokens). auto: "
        "on for sft and pt without packing; dpo only with flash_attention_2; never for kto and rm",
        json_schema_extra=_meta("Padding-free batches", advanced=True),
    )
    group_by_length: bool = Field(
        False,
        description="Batch samples of similar length together: less padding, a less random order (sft, pt; "
        "not with packing; not dpo, kto or rm)",
        json_schema_extra=_meta("Group by length", advanced=True),
    )
    train_on_prompt: bool = Field(
        False,
        description="Also compute the loss on prompt tokens",
        json_schema_extra=_meta("Train on prompt", advanced=True),
    )
    mask_history: bool = Field(
        False,
        description="Train only the last assistant turn of each conversation; earlier answers are context (sft; "
        "a sample over the cutoff keeps its last turns)",
        json_schema_extra=_meta("Mask history", advanced=True),
    )
    enable_thinking: bool = Field(
        True,
        description="Reasoning templates (qwen3, deepseekr1, ...): on, an answer without a thought gets an empty "
        "<think> block, trained; off, thoughts are removed and the empty block goes into the prompt",
        json_schema_extra=_meta("Enable thinking", advanced=True),
    )
    tool_format: Literal["template", "default", "qwen", "llama3", "glm4", "mistral"] = Field(
        "template",
        description="How tools and tool calls are written: the named template's own format, or another one "
        "(LLaMA-Factory's tool_format)",
        json_schema_extra=_meta("Tool format", advanced=True),
    )
    preprocessing_workers: int = Field(
        1,
        ge=1,
        le=256,
        description="Processes for tokenisation",
        json_schema_extra=_meta("Preprocessing workers", advanced=True),
    )
    dataloader_workers: int = Field(
        0,
        ge=0,
        le=64,
        description="Worker processes that load batches during training (0: in the training process)",
        json_schema_extra=_meta("Data loader workers", advanced=True),
    )
