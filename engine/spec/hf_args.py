"""The fields of the installed transformers' ``TrainingArguments``, as a light table: name -> (kinds, default[,
choices]). LLaMA-Factory passes every TrainingArguments key of a training YAML through to transformers; Studio does
the same for the keys it has no spec field for (``train.extra_args``), type-checked here without importing
transformers. ``tests/engine/test_hf_args.py`` compares this table with the installed transformers' dataclass fields
and prints the table to paste here when they differ (the table is generated, not hand-written).

Kinds: ``bool``, ``int``, ``float`` (an int is taken too), ``str``, ``dict``, ``list``, ``object`` (not settable from
YAML), joined by ``|``; ``None`` allows null. Enum fields are ``str`` with their choices.

Light: stdlib only (never transformers).
"""

from __future__ import annotations

from typing import Any

TRANSFORMERS_VERSION = "5.24.0"  # the version the table was generated from

HF_TRAINING_ARGS: dict[str, tuple] = {
    "output_dir": ("str|None", None),
    "per_device_train_batch_size": ("int", 8),
    "num_train_epochs": ("float", 3.0),
    "max_steps": ("int", -1),
    "learning_rate": ("float", 5e-05),
    "lr_scheduler_type": (
        "str",
        "linear",
        (
            "linear",
            "cosine",
            "cosine_with_restarts",
            "polynomial",
            "constant",
            "constant_with_warmup",
            "inverse_sqrt",
            "reduce_lr_on_plateau",
            "cosine_with_min_lr",
            "cosine_warmup_with_min_lr",
            "warmup_stable_decay",
            "greedy",
        ),
    ),
    "lr_scheduler_kwargs": ("dict|str|None", None),
    "warmup_steps": ("float", 0),
    "optim": (
        "str",
        "adamw_torch_fused",
        (
            "adamw_torch",
            "adamw_torch_fused",
            "adamw_torch_xla",
            "adamw_torch_npu_fused",
            "adafactor",
            "adamw_anyprecision",
            "adamw_torch_4bit",
            "adamw_torch_8bit",
            "ademamix",
            "sgd",
            "adagrad",
            "adamw_bnb_8bit",
            "adamw_8bit",
            "ademamix_8bit",
            "lion_8bit",
            "lion_32bit",
            "paged_adamw_32bit",
            "paged_adamw_8bit",
            "paged_ademamix_32bit",
            "paged_ademamix_8bit",
            "paged_lion_32bit",
            "paged_lion_8bit",
            "rmsprop",
            "rmsprop_bnb",
            "rmsprop_bnb_8bit",
            "rmsprop_bnb_32bit",
            "galore_adamw",
            "galore_adamw_8bit",
            "galore_adafactor",
            "galore_adamw_layerwise",
            "galore_adamw_8bit_layerwise",
            "galore_adafactor_layerwise",
            "lomo",
            "adalomo",
            "grokadamw",
            "schedule_free_radam",
            "schedule_free_adamw",
            "schedule_free_sgd",
            "apollo_adamw",
            "apollo_adamw_layerwise",
            "stable_adamw",
        ),
    ),
    "optim_args": ("str|None", None),
    "weight_decay": ("float", 0.0),
    "adam_beta1": ("float", 0.9),
    "adam_beta2": ("float", 0.999),
    "adam_epsilon": ("float", 1e-08),
    "optim_target_modules": ("list|str|None", None),
    "gradient_accumulation_steps": ("int", 1),
    "average_tokens_across_devices": ("bool", True),
    "max_grad_norm": ("float", 1.0),
    "label_smoothing_factor": ("float", 0.0),
    "bf16": ("bool", False),
    "fp16": ("bool", False),
    "bf16_full_eval": ("bool", False),
    "fp16_full_eval": ("bool", False),
    "tf32": ("bool|None", None),
    "activation_checkpointing": ("bool|None", None),
    "activation_checkpointing_kwargs": ("dict|str|None", None),
    "gradient_checkpointing": ("bool|None", None),
    "gradient_checkpointing_kwargs": ("dict|str|None", None),
    "torch_compile": ("bool", False),
    "torch_compile_backend": ("str|None", None),
    "torch_compile_mode": ("str|None", None),
    "use_liger_kernel": ("bool", False),
    "liger_kernel_config": ("dict|None", None),
    "use_cache": ("bool", False),
    "neftune_noise_alpha": ("float|None", None),
    "torch_empty_cache_steps": ("int|None", None),
    "auto_find_batch_size": ("bool", False),
    "logging_strategy": ("str", "steps", ("no", "steps", "epoch")),
    "logging_steps": ("float", 500),
    "logging_first_step": ("bool", False),
    "log_on_each_node": ("bool", True),
    "logging_nan_inf_filter": ("bool", True),
    "include_num_input_tokens_seen": ("bool|str", "no"),
    "log_level": ("str", "passive"),
    "log_level_replica": ("str", "warning"),
    "disable_tqdm": ("bool|None", None),
    "report_to": ("list|str|None", "none"),
    "run_name": ("str|None", None),
    "project": ("str", "huggingface"),
    "trackio_space_id": ("str|None", None),
    "trackio_bucket_id": ("str|None", None),
    "trackio_static_space_id": ("bool|str|None", None),
    "eval_strategy": ("str", "no", ("no", "steps", "epoch")),
    "eval_steps": ("float|None", None),
    "eval_delay": ("float", 0),
    "per_device_eval_batch_size": ("int", 8),
    "prediction_loss_only": ("bool", False),
    "eval_on_start": ("bool", False),
    "eval_do_concat_batches": ("bool", True),
    "eval_use_gather_object": ("bool", False),
    "eval_accumulation_steps": ("int|None", None),
    "include_for_metrics": ("list", []),
    "batch_eval_metrics": ("bool", False),
    "save_only_model": ("bool", False),
    "save_strategy": ("str", "steps", ("no", "steps", "epoch", "best")),
    "save_steps": ("float", 500),
    "save_on_each_node": ("bool", False),
    "save_total_limit": ("int|None", None),
    "enable_jit_checkpoint": ("bool", False),
    "push_to_hub": ("bool", False),
    "hub_token": ("str|None", None),
    "hub_private_repo": ("bool|None", None),
    "hub_model_id": ("str|None", None),
    "hub_strategy": ("str", "every_save", ("end", "every_save", "checkpoint", "all_checkpoints")),
    "hub_always_push": ("bool", False),
    "hub_revision": ("str|None", None),
    "load_best_model_at_end": ("bool", False),
    "metric_for_best_model": ("str|None", None),
    "greater_is_better": ("bool|None", None),
    "ignore_data_skip": ("bool", False),
    "restore_callback_states_from_checkpoint": ("bool", False),
    "full_determinism": ("bool", False),
    "seed": ("int", 42),
    "data_seed": ("int|None", None),
    "use_cpu": ("bool", False),
    "accelerator_config": ("dict|str|None", None),
    "parallelism_config": ("object|None", None),
    "dataloader_drop_last": ("bool", False),
    "dataloader_num_workers": ("int", 0),
    "dataloader_pin_memory": ("bool", True),
    "dataloader_persistent_workers": ("bool", False),
    "dataloader_prefetch_factor": ("int|None", None),
    "dataloader_multiprocessing_context": ("str|None", None),
    "dataloader_in_order": ("bool", True),
    "remove_unused_columns": ("bool", True),
    "label_names": ("list|None", None),
    "train_sampling_strategy": ("str", "random"),
    "length_column_name": ("str", "length"),
    "ddp_find_unused_parameters": ("bool|None", None),
    "ddp_bucket_cap_mb": ("int|None", None),
    "ddp_broadcast_buffers": ("bool|None", None),
    "ddp_static_graph": ("bool|None", None),
    "ddp_backend": ("str|None", None),
    "ddp_timeout": ("int", 1800),
    "fsdp": ("str|None", None),
    "fsdp_config": ("dict|str|None", None),
    "deepspeed": ("dict|str|None", None),
    "debug": ("list|str", ""),
    "skip_memory_metrics": ("bool", True),
    "do_train": ("bool", False),
    "do_eval": ("bool", False),
    "do_predict": ("bool", False),
    "resume_from_checkpoint": ("str|None", None),
    "local_rank": ("int", -1),
}


def _kind_ok(kind: str, value: Any) -> bool:
    if kind == "None":
        return value is None
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "dict":
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if kind == "list":
        return isinstance(value, list)
    return False  # object: a Python object, not a YAML value


def type_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be TrainingArguments' ``name`` (unknown, wrong type, not a choice); None if it can."""
    entry = HF_TRAINING_ARGS.get(name)
    if entry is None:
        return f"not a TrainingArguments field of transformers {TRANSFORMERS_VERSION}"
    kinds, choices = entry[0].split("|"), entry[2] if len(entry) > 2 else None
    if not any(_kind_ok(k, value) for k in kinds):
        return f"{value!r} is not {' or '.join(k if k != 'None' else 'null' for k in kinds)}"
    if choices and isinstance(value, str) and value not in choices:
        return f"{value!r} is not one of: {', '.join(choices)}"
    return None


# TrainingArguments that Studio sets from a spec field (name -> that field) or itself (name -> ""): never taken from
# train.extra_args, where they would contradict the spec.
STUDIO_SETS: dict[str, str] = {
    "use_liger_kernel": "train.liger_kernel",
    "output_dir": "output.output_dir",
    "per_device_train_batch_size": "train.per_device_batch_size",
    "per_device_eval_batch_size": "train.per_device_eval_batch_size",
    "num_train_epochs": "train.num_epochs",
    "max_steps": "train.max_steps",
    "learning_rate": "train.learning_rate",
    "lr_scheduler_type": "train.lr_scheduler",
    "warmup_steps": "train.warmup_steps",
    "optim": "train.optimizer",
    "optim_target_modules": "train.low_rank.targets",  # GaLore / APOLLO (engine.trainer.optim.low_rank_settings)
    "optim_args": "train.low_rank",
    "weight_decay": "train.weight_decay",
    "gradient_accumulation_steps": "train.gradient_accumulation",
    "max_grad_norm": "train.max_grad_norm",
    "bf16": "train.precision",
    "fp16": "train.precision",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "gradient_checkpointing_kwargs": "",
    "seed": "train.seed",
    "logging_steps": "train.logging_steps",
    "save_strategy": "train.save_strategy",
    "save_steps": "train.save_steps",
    "save_only_model": "train.save_only_model",
    "save_total_limit": "train.save_total_limit",
    "eval_strategy": "train.eval_strategy",
    "eval_steps": "train.eval_steps",
    "neftune_noise_alpha": "train.neftune_noise_alpha",
    "include_num_input_tokens_seen": "train.count_input_tokens",
    "resume_from_checkpoint": "train.resume_from",
    "dataloader_num_workers": "data.dataloader_workers",
    "train_sampling_strategy": "data.group_by_length",
    "ddp_timeout": "launch.ddp_timeout",
    "use_cpu": "launch.device",
    "deepspeed": "launch.backend",
    "fsdp": "launch.backend",
    "fsdp_config": "launch.fsdp",
    "accelerator_config": "launch",
    "parallelism_config": "launch",
    "ddp_backend": "",
    "ddp_find_unused_parameters": "",
    "local_rank": "",
    "report_to": "output.report_to",
    "run_name": "output.run_name",
    "remove_unused_columns": "",
    "label_names": "",
    "length_column_name": "",
    "disable_tqdm": "",
    "do_train": "",
    "do_eval": "",
    "do_predict": "",
}


def extra_arg_problem(name: str, value: Any) -> tuple[str, dict] | None:
    """(catalog key, parameters) of why ``name: value`` cannot be in train.extra_args; None when it can."""
    if name in STUDIO_SETS:
        if STUDIO_SETS[name]:
            return "extra_arg_has_field", {"name": name, "field": STUDIO_SETS[name]}
        return "extra_arg_studio", {"name": name}
    problem = type_problem(name, value)
    if problem is None:
        return None
    if name not in HF_TRAINING_ARGS:
        return "extra_arg_unknown", {"name": name, "version": TRANSFORMERS_VERSION}
    return "extra_arg_value", {"name": name, "problem": problem}
