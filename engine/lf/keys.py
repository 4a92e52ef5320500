"""LLaMA-Factory training-args keys: which pass through to a RunSpec field, which are converted, LF's defaults, and
the collector that gathers the spec dict, unsupported keys and notes while engine.lf.compat converts.

Light: stdlib only (never torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# LF key -> spec path for values that pass through unchanged (pydantic checks them; errors name the LF key).
_DIRECT: dict[str, str] = {
    "model_name_or_path": "model.name_or_path",
    "model_revision": "model.revision",
    "trust_remote_code": "model.trust_remote_code",
    "stage": "method.stage",
    "finetuning_type": "method.finetuning",
    "quantization_bit": "method.quantization.bits",
    "quantization_type": "method.quantization.quant_type",
    "double_quantization": "method.quantization.double_quant",
    "lora_rank": "method.lora.rank",
    "lora_alpha": "method.lora.alpha",
    "lora_dropout": "method.lora.dropout",
    "use_rslora": "method.lora.use_rslora",
    "use_dora": "method.lora.use_dora",
    "freeze_trainable_layers": "method.freeze.trainable_layers",
    "pref_beta": "method.dpo.beta",
    "pref_loss": "method.dpo.loss_type",
    "mix_strategy": "data.mix",
    "template": "data.template",
    "cutoff_len": "data.cutoff_len",
    "max_samples": "data.max_samples",
    "val_size": "data.val_size",
    "train_on_prompt": "data.train_on_prompt",
    "preprocessing_num_workers": "data.preprocessing_workers",
    "group_by_length": "data.group_by_length",  # transformers 4's TrainingArguments key, which LF passes through
    "output_dir": "output.output_dir",
    "run_name": "output.run_name",
    "logging_steps": "train.logging_steps",
    "save_steps": "train.save_steps",
    "eval_steps": "train.eval_steps",
    "save_total_limit": "train.save_total_limit",
    "num_train_epochs": "train.num_epochs",
    "max_steps": "train.max_steps",
    "per_device_train_batch_size": "train.per_device_batch_size",
    "gradient_accumulation_steps": "train.gradient_accumulation",
    "learning_rate": "train.learning_rate",
    "lr_scheduler_type": "train.lr_scheduler",
    "warmup_ratio": "train.warmup_ratio",
    "warmup_steps": "train.warmup_steps",
    "weight_decay": "train.weight_decay",
    "optim": "train.optimizer",
    "max_grad_norm": "train.max_grad_norm",
    "seed": "train.seed",
    "resume_from_checkpoint": "train.resume_from",
}
# Keys handled by code below (conversions), with the spec path used to name them in errors.
_CONVERTED: dict[str, str] = {
    "flash_attn": "model.attn_implementation",
    "rope_scaling": "model.rope_scaling",
    "lora_target": "method.lora.targets",
    "freeze_trainable_modules": "method.freeze.trainable_modules",
    "freeze_extra_modules": "method.freeze.extra_modules",
    "dataset": "data.datasets",
    "dataset_dir": "data.dataset_dir",
    "interleave_probs": "data.mix_probs",
    "packing": "data.packing",
    "neat_packing": "data.packing",
    "bf16": "train.precision",
    "fp16": "train.precision",
    "pure_bf16": "train.precision",
    "disable_gradient_checkpointing": "train.gradient_checkpointing",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "report_to": "output.report_to",
    "deepspeed": "launch",
    "do_train": "",
    "quantization_method": "",
    "overwrite_cache": "",
    "logging_dir": "",
    "overwrite_output_dir": "",
    "plot_loss": "",
}
# Defaults of LLaMA-Factory / transformers that differ from ours: applied when the key is absent.
_LF_DEFAULTS: dict[str, Any] = {
    "cutoff_len": 2048,
    "learning_rate": 5e-5,
    "lr_scheduler_type": "linear",
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "logging_steps": 500,
    "save_total_limit": None,
    "lora_rank": 8,
    "template": "auto",
}
_NULLABLE = {"max_samples", "save_total_limit", "resume_from_checkpoint"}
_FLASH_IN = {"auto": "sdpa", "sdpa": "sdpa", "fa2": "flash_attention_2", "disabled": "eager"}
_FLASH_OUT = {"sdpa": "sdpa", "flash_attention_2": "fa2", "eager": "disabled"}
_LF_MARKERS = {"model_name_or_path", "stage", "finetuning_type", "dataset", "do_train", "lora_target", "template"}


class _Import:
    """Collects the spec dict, unsupported keys (with why) and notes while converting."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.unsupported: dict[str, str] = {}
        self.notes: list[str] = []

    def put(self, path: str, value: Any) -> None:
        node = self.data
        *parents, leaf = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value

    def bad(self, key: str, why: str = "not supported by Studio") -> None:
        self.unsupported[key] = why


def _csv(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def _resolve(path: str, base_dir: Path | None) -> str:
    try:
        p = Path(str(path)).expanduser()
    except RuntimeError:  # ~user that does not exist: keep it literal, the context check reports it
        p = Path(str(path))
    return str((base_dir / p).resolve()) if base_dir is not None and not p.is_absolute() else str(p)
