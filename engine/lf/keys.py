"""LLaMA-Factory training-args keys: which pass through to a RunSpec field, which are converted, LF's defaults, and
the collector that gathers the spec dict, unsupported keys and notes while engine.lf.to_spec converts. The tables'
reasons are catalog keys of engine.lf.messages (the Train tab shows them in the page's language).

Light: stdlib only (never torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.core.messages import Message
from engine.lf.messages import message

# LF key -> spec path for values that pass through unchanged (pydantic checks them; errors name the LF key).
_DIRECT: dict[str, str] = {
    "model_name_or_path": "model.name_or_path",
    "model_revision": "model.revision",
    "trust_remote_code": "model.trust_remote_code",
    "quantization_bit": "method.quantization.bits",
    "quantization_type": "method.quantization.quant_type",
    "double_quantization": "method.quantization.double_quant",
    "lora_rank": "method.lora.rank",
    "lora_alpha": "method.lora.alpha",
    "lora_dropout": "method.lora.dropout",
    "use_rslora": "method.lora.use_rslora",
    "use_dora": "method.lora.use_dora",
    "loraplus_lr_ratio": "method.lora.loraplus_lr_ratio",
    "loraplus_lr_embedding": "method.lora.loraplus_lr_embedding",
    "image_max_pixels": "model.vision.image_max_pixels",
    "image_min_pixels": "model.vision.image_min_pixels",
    "freeze_vision_tower": "model.vision.freeze_vision_tower",
    "freeze_multi_modal_projector": "model.vision.freeze_multi_modal_projector",
    "freeze_language_model": "model.vision.freeze_language_model",
    "pissa_init": "method.lora.pissa_init",
    "pissa_iter": "method.lora.pissa_iter",
    "pissa_convert": "method.lora.pissa_convert",
    "oft_rank": "method.oft.rank",
    "oft_block_size": "method.oft.block_size",
    "module_dropout": "method.oft.dropout",
    "badam_mode": "train.badam.mode",
    "badam_start_block": "train.badam.start_block",
    "badam_switch_mode": "train.badam.switch_mode",
    "badam_switch_interval": "train.badam.switch_interval",
    "badam_update_ratio": "train.badam.update_ratio",
    "badam_mask_mode": "train.badam.mask_mode",
    "badam_verbose": "train.badam.verbose",
    "freeze_trainable_layers": "method.freeze.trainable_layers",
    "use_llama_pro": "method.freeze.use_llama_pro",
    "pref_beta": "method.dpo.beta",
    "pref_loss": "method.dpo.loss_type",
    "simpo_gamma": "method.dpo.simpo_gamma",
    "pref_ftx": "method.dpo.ftx",
    "kto_chosen_weight": "method.kto.desirable_weight",
    "kto_rejected_weight": "method.kto.undesirable_weight",
    "mix_strategy": "data.mix",
    "template": "data.template",
    "cutoff_len": "data.cutoff_len",
    "max_samples": "data.max_samples",
    "val_size": "data.val_size",
    "train_on_prompt": "data.train_on_prompt",
    "mask_history": "data.mask_history",
    "enable_thinking": "data.enable_thinking",
    "preprocessing_num_workers": "data.preprocessing_workers",
    "group_by_length": "data.group_by_length",  # transformers 4's TrainingArguments key, which LF passes through
    "output_dir": "output.output_dir",
    "overwrite_output_dir": "output.overwrite",
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
    # TrainingArguments LF passes through that have spec fields
    "save_strategy": "train.save_strategy",
    "save_only_model": "train.save_only_model",
    "eval_strategy": "train.eval_strategy",
    "per_device_eval_batch_size": "train.per_device_eval_batch_size",
    "neftune_noise_alpha": "train.neftune_noise_alpha",
    "asft_alpha": "train.asft_alpha",
    "eaft_alpha": "train.eaft_alpha",
    "dataloader_num_workers": "data.dataloader_workers",
    "ddp_timeout": "launch.ddp_timeout",
}
# Keys whose spec field depends on the stage: stage -> {LF key -> spec path}, taking the place of _DIRECT's.
_STAGE_DIRECT: dict[str, dict[str, str]] = {"kto": {"pref_beta": "method.kto.beta"}}
# GaLore's and APOLLO's options (galore_<key>, apollo_<key>) -> train.low_rank.<field>: read from the one in use
_LOW_RANK_KEYS = {
    "target": "targets",
    "rank": "rank",
    "update_interval": "update_interval",
    "scale": "scale",
    "proj_type": "proj_type",
    "layerwise": "layerwise",
}
# LF's use_* optimizer switches -> train.optimizer (GaLore's follows LF's optim: adamw / 8-bit / adafactor)
_OPTIMIZER_SWITCHES = {
    "use_galore": "galore_adamw",
    "use_apollo": "apollo_adamw",
    "use_badam": "badam",
    "use_adam_mini": "adam_mini",
    "use_muon": "muon",
}
# LF's sft loss switches -> train.loss (engine.trainer.sft_losses), in the order LF's trainer checks them
_LOSS_SWITCHES = {"use_dft_loss": "dft", "use_eaft_loss": "eaft", "use_asft_loss": "asft"}
_GALORE_BY_OPTIM = {
    "adamw_torch": "galore_adamw",
    "adamw_torch_fused": "galore_adamw",
    "adamw_8bit": "galore_adamw_8bit",
    "adamw_bnb_8bit": "galore_adamw_8bit",
    "paged_adamw_8bit": "galore_adamw_8bit",
    "adafactor": "galore_adafactor",
}
# Keys handled by code below (conversions), with the spec path used to name them in errors.
# LF's Ray launcher (RayArguments, on with USE_RAY=1): key -> (the launch.ray field, LF's default).
_RAY_KEYS: dict[str, tuple[str, Any]] = {
    "ray_num_workers": ("launch.ray.num_workers", 1),
    "resources_per_worker": ("launch.ray.resources_per_worker", {"GPU": 1}),
    "placement_strategy": ("launch.ray.placement_strategy", "PACK"),
    "ray_init_kwargs": ("launch.ray.init_kwargs", None),
    "ray_storage_path": ("launch.ray.storage_path", "./saves"),
    "ray_run_name": ("launch.ray.run_name", None),
}
_CONVERTED: dict[str, str] = {
    **{key: path for key, (path, _) in _RAY_KEYS.items()},
    "ray_storage_filesystem": "",
    "master_addr": "",  # LF 0.9.5's Ray rendezvous: Ray Train sets it
    "master_port": "",
    "flash_attn": "model.attn_implementation",
    "use_modelscope_hub": "model.hub",  # LF's default: USE_MODELSCOPE_HUB
    "rope_scaling": "model.rope_scaling",
    "lora_target": "method.lora.targets",
    "oft_target": "method.oft.targets",
    # "": not used to name spec paths in errors (optim names train.optimizer, galore_* train.low_rank)
    **dict.fromkeys(_OPTIMIZER_SWITCHES, ""),
    **dict.fromkeys(_LOSS_SWITCHES, "train.loss"),
    **{f"galore_{k}": f"train.low_rank.{v}" for k, v in _LOW_RANK_KEYS.items()},
    **{f"apollo_{k}": "" for k in _LOW_RANK_KEYS},
    "apollo_proj": "train.low_rank.apollo_proj",
    "apollo_scale_type": "train.low_rank.apollo_scale_type",
    "apollo_scale_front": "",
    "freeze_trainable_modules": "method.freeze.trainable_modules",
    "freeze_extra_modules": "method.freeze.extra_modules",
    "dataset": "data.datasets",
    "dataset_dir": "data.dataset_dir",
    "interleave_probs": "data.mix_probs",
    "eval_dataset": "data.eval_datasets",
    "tool_format": "data.tool_format",
    "packing": "data.packing",
    "neat_packing": "data.packing",
    "bf16": "train.precision",
    "fp16": "train.precision",
    "pure_bf16": "train.precision",
    "disable_gradient_checkpointing": "train.gradient_checkpointing",
    "gradient_checkpointing": "train.gradient_checkpointing",
    "enable_liger_kernel": "train.liger_kernel",
    "use_liger_kernel": "train.liger_kernel",
    "report_to": "output.report_to",
    "deepspeed": "launch",
    "include_num_input_tokens_seen": "train.count_input_tokens",
    "use_cpu": "launch.device",
    "no_cuda": "launch.device",
    "adafactor": "train.optimizer",
    "stage": "method.stage",
    "finetuning_type": "method.finetuning",
    "adapter_name_or_path": "",
    "adapter_folder": "",
    "tokenized_path": "",
    "fsdp": "launch.backend",  # transformers' FSDP options (engine.lf.launch_settings._from_fsdp_args)
    "fsdp_transformer_layer_cls_to_wrap": "launch.fsdp.layer_cls_to_wrap",
    "fsdp_min_num_params": "launch.fsdp.min_num_params",
    "fp8": "train.fp8",
    "fp8_backend": "train.fp8_backend",
    "fp8_enable_fsdp_float8_all_gather": "",
    "accelerator_config": "",
    "parallelism_config": "",
    "do_train": "",
    "quantization_method": "",
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
    "eval_strategy": "no",
}
# LF keys accepted with a note: they change nothing in a Studio training run. key -> why (a catalog key of
# engine.lf.messages: the note is lf.noted with it).
_NOTED: dict[str, str] = {
    "overwrite_cache": "lf.noted_overwrite_cache",
    "logging_dir": "lf.noted_logging_dir",
    "plot_loss": "lf.noted_plot_loss",
    "disable_tqdm": "lf.noted_disable_tqdm",
    "use_fast_tokenizer": "lf.noted_use_fast_tokenizer",
    "low_cpu_mem_usage": "lf.noted_low_cpu_mem_usage",
    "print_param_status": "lf.noted_print_param_status",
    "cache_dir": "lf.noted_cache_dir",
    "hf_hub_token": "lf.noted_hf_hub_token",
    "ms_hub_token": "lf.noted_ms_hub_token",
    "om_hub_token": "lf.noted_other_hub",
    "preprocessing_batch_size": "lf.noted_preprocessing_batch_size",
    "data_shared_file_system": "lf.noted_data_shared_file_system",
    "include_effective_tokens_per_second": "lf.noted_tokens_per_second",
    "include_tokens_per_second": "lf.noted_tokens_per_second",
    "use_reentrant_gc": "lf.noted_use_reentrant_gc",
    "do_eval": "lf.noted_do_eval",
    **dict.fromkeys("video_max_pixels video_min_pixels video_fps video_maxlen".split(), "lf.noted_video"),
    **dict.fromkeys(
        "offload_folder use_kv_cache infer_backend infer_dtype vllm_maxlen vllm_gpu_util vllm_enforce_eager "
        "vllm_max_lora_rank vllm_config sglang_maxlen sglang_mem_fraction sglang_tp_size sglang_config "
        "sglang_lora_backend".split(),
        "lf.noted_inference",
    ),
    **dict.fromkeys(
        "do_sample temperature top_p top_k num_beams max_length max_new_tokens repetition_penalty "
        "length_penalty skip_special_tokens eval_num_beams sortish_sampler generation_max_length "
        "generation_num_beams generation_config".split(),
        "lf.noted_generation",
    ),
    **dict.fromkeys(
        "export_dir export_size export_device export_quantization_bit export_quantization_dataset "
        "export_quantization_nsamples export_quantization_maxlen export_legacy_format export_hub_model_id".split(),
        "lf.noted_export",
    ),
    **dict.fromkeys("compute_dtype device_map model_max_length block_diag_attn".split(), "lf.noted_derived"),
    **dict.fromkeys(
        "remove_unused_columns label_names length_column_name local_rank ddp_backend "
        "ddp_find_unused_parameters gradient_checkpointing_kwargs".split(),
        "lf.noted_studio_sets",
    ),
}
# Options of a feature LF switches on with another key (use_galore, use_swanlab, fp8, ...): no effect while it is
# off, and refused through that key when it is on. Accepted silently.
_OPTIONS_OF_OFF_FEATURES = set(
    "swanlab_project swanlab_workspace swanlab_run_name swanlab_mode swanlab_api_key "
    "swanlab_logdir swanlab_lark_webhook_url swanlab_lark_secret buffer_size "
    "profiler_output_dir profiler_wait_steps profiler_warmup_steps "
    "profiler_active_steps profiler_repeat profiler_record_shapes profiler_profile_memory profiler_with_stack".split()
)
# LF features Studio does not have: key -> (LF's default, the catalog key of one line naming the feature and what
# to use instead, engine.lf.messages). At its default (or null) the feature is off and the key is accepted; any
# other value is refused with the line.
_FEATURES: dict[str, tuple[Any, str]] = {
    "image_do_pan_and_scan": (False, "lf.refused_multimodal"),
    "crop_to_patches": (False, "lf.refused_multimodal"),
    "use_audio_in_video": (False, "lf.refused_multimodal"),
    "audio_sampling_rate": (16000, "lf.refused_multimodal"),
    "media_dir": (None, "lf.refused_multimodal"),
    "create_new_adapter": (False, "lf.refused_new_adapter"),
    "additional_target": (None, "lf.refused_additional_target"),
    "pref_bco_weight": (0.0, "lf.refused_pref_option"),
    "dpo_label_smoothing": (0.0, "lf.refused_pref_option"),
    "ld_alpha": (None, "lf.refused_pref_option"),
    "ppo_buffer_size": (1, "lf.refused_ppo"),
    "ppo_epochs": (4, "lf.refused_ppo"),
    "ppo_score_norm": (False, "lf.refused_ppo"),
    "ppo_target": (6.0, "lf.refused_ppo"),
    "ppo_whiten_rewards": (False, "lf.refused_ppo"),
    "reward_model": (None, "lf.refused_ppo"),
    "reward_model_adapters": (None, "lf.refused_ppo"),
    "reward_model_quantization_bit": (None, "lf.refused_ppo"),
    "reward_model_type": ("lora", "lf.refused_ppo"),
    "ref_model": (None, "lf.refused_ref_model"),
    "use_openmind_hub": (False, "lf.refused_openmind"),  # LF's default: USE_OPENMIND_HUB
    "ref_model_adapters": (None, "lf.refused_ref_model"),
    "ref_model_quantization_bit": (None, "lf.refused_ref_model"),
    "use_swanlab": (False, "lf.refused_swanlab"),
    "use_mca": (False, "lf.refused_mca"),
    "use_hyper_parallel": (False, "lf.refused_hyper_parallel"),
    "hyper_parallel_args": (None, "lf.refused_hyper_parallel"),
    "compute_accuracy": (False, "lf.refused_compute_accuracy"),
    "disable_shuffling": (False, "lf.refused_disable_shuffling"),
    "early_stopping_steps": (None, "lf.refused_early_stopping"),
    "shift_attn": (False, "lf.refused_shift_attn"),
    "mixture_of_depths": (None, "lf.refused_mixture_of_depths"),
    "use_unsloth": (False, "lf.refused_unsloth"),
    "use_unsloth_gc": (False, "lf.refused_unsloth"),
    "use_v1_kernels": (False, "lf.refused_v1_kernels"),
    "use_kt": (False, "lf.refused_kt"),
    "kt_weight_path": (None, "lf.refused_kt"),
    "kt_expert_checkpoint_path": (None, "lf.refused_kt"),
    "kt_use_lora_experts": (None, "lf.refused_kt"),
    "kt_lora_expert_num": (None, "lf.refused_kt"),
    "kt_lora_expert_intermediate_size": (None, "lf.refused_kt"),
    "moe_aux_loss_coef": (None, "lf.refused_moe_aux_loss"),
    "upcast_layernorm": (False, "lf.refused_upcast"),
    "upcast_lmhead_output": (False, "lf.refused_upcast"),
    "train_from_scratch": (False, "lf.refused_from_scratch"),
    "resize_vocab": (False, "lf.refused_tokens"),
    "split_special_tokens": (False, "lf.refused_tokens"),
    "add_tokens": (None, "lf.refused_tokens"),
    "add_special_tokens": (None, "lf.refused_tokens"),
    "new_special_tokens_config": (None, "lf.refused_tokens"),
    "init_special_tokens": ("noise_init", "lf.refused_tokens"),
    "quantization_device_map": (None, "lf.refused_quantization_device_map"),
    "eval_on_each_dataset": (False, "lf.refused_eval_each_dataset"),
    "streaming": (False, "lf.refused_streaming"),
    "ignore_pad_token_for_loss": (True, "lf.refused_ignore_pad"),
    "default_system": (None, "lf.refused_default_system"),
    "preserve_thinking": (False, "lf.refused_preserve_thinking"),
    "enable_torch_profiler": (False, "lf.refused_profiler"),
    "profile_modules": (None, "lf.refused_profiler"),
    "do_predict": (False, "lf.refused_predict"),
    "predict_with_generate": (False, "lf.refused_predict"),
    "fsdp_config": (None, "lf.refused_fsdp_args"),
    "accelerator_config": (None, "lf.refused_accelerator_config"),
    "parallelism_config": (None, "lf.refused_parallelism_config"),
    "adapter_folder": (None, "lf.refused_adapter_folder"),
}
# TrainingArguments of transformers 4 that LF passed through and transformers 5 removed: key -> (transformers 4's
# default, the catalog key of what to use instead). At the default: a note; otherwise refused.
_HF4_REMOVED: dict[str, tuple[Any, str]] = {
    "per_gpu_train_batch_size": (None, "lf.hf4_per_device_train"),
    "per_gpu_eval_batch_size": (None, "lf.hf4_per_device_eval"),
    "save_safetensors": (True, "lf.hf4_safetensors"),
    "use_mps_device": (False, "lf.hf4_device"),
    "jit_mode_eval": (False, "lf.hf4_remove"),
    "fp16_opt_level": ("O1", "lf.hf4_apex"),
    "half_precision_backend": ("auto", "lf.hf4_apex"),
    "fp16_backend": ("auto", "lf.hf4_apex"),
    "tpu_num_cores": (None, "lf.hf4_device"),
    "tpu_metrics_debug": (False, "lf.hf4_device"),
    "past_index": (-1, "lf.hf4_remove"),
    "use_legacy_prediction_loop": (False, "lf.hf4_remove"),
    "include_inputs_for_metrics": (False, "lf.hf4_include_for_metrics"),
    "push_to_hub_model_id": (None, "lf.hf4_hub_model_id"),
    "push_to_hub_organization": (None, "lf.hf4_hub_model_id"),
    "push_to_hub_token": (None, "lf.hf4_hub_token"),
    "mp_parameters": ("", "lf.hf4_remove"),
    "torchdynamo": (None, "lf.hf4_torch_compile"),
    "ray_scope": ("last", "lf.hf4_remove"),
}
# LLaMA-Factory's export YAML (``llamafactory-cli export``, ExportArguments + the model keys it reads) as
# ``studio merge --lf-yaml`` takes it: key -> LF's default. engine.lf.merge_yaml.lf_export_to_merge converts them; any
# other LF key is noted (a training setting the merge does not use) and a key LF does not have is refused.
_EXPORT_KEYS: dict[str, Any] = {
    "model_name_or_path": None,
    "adapter_name_or_path": None,
    "template": None,
    "finetuning_type": "lora",
    "trust_remote_code": False,
    "export_dir": None,
    "export_size": 5,
    "export_device": "cpu",
    "export_legacy_format": False,
    "export_hub_model_id": None,
    "export_quantization_bit": None,
    "quantization_bit": None,
}
# Options of GPTQ export: no effect while export_quantization_bit is off, which is refused when on.
_EXPORT_QUANT_OPTIONS = {"export_quantization_dataset", "export_quantization_nsamples", "export_quantization_maxlen"}
# LF's templates of vision-language families Studio has no text template for: the model's processor renders them
# (engine.trainer.vision), so they import as template auto, with a note.
PROCESSOR_TEMPLATES = {"moss_vl"}
_NULLABLE = {"max_samples", "save_total_limit", "resume_from_checkpoint"}
_FLASH_IN = {"auto": "sdpa", "sdpa": "sdpa", "fa2": "flash_attention_2", "disabled": "eager"}
_FLASH_OUT = {"sdpa": "sdpa", "flash_attention_2": "fa2", "eager": "disabled"}
_LF_MARKERS = {"model_name_or_path", "stage", "finetuning_type", "dataset", "do_train", "lora_target", "template"}


class _Import:
    """Collects the spec dict, unsupported keys (with why) and notes while converting; every why and note is a
    catalog message (engine.lf.messages), so the page can translate it."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.unsupported: dict[str, Message] = {}
        self.notes: list[Message] = []
        self.missing: dict[str, Message] = {}  # paths found nowhere: refused when the spec's files are checked
        self.names: dict[str, str] = {}  # spec path -> the LF key that set it, where several keys can (use_badam)

    def put(self, path: str, value: Any) -> None:
        node = self.data
        *parents, leaf = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value

    def bad(self, key: str, why: Message | None = None) -> None:
        self.unsupported[key] = why if why is not None else message("lf.not_supported")


def _csv(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes"))


def _lf_path(value: Any, base_dir: Path | None, *, must_exist: bool = True) -> tuple[Path | None, list[Path]]:
    """A relative path as LLaMA-Factory reads it: from the working directory (LF's README runs every example from
    the repository root), then from the YAML's folder. Returns (the first that exists, or None; where it looked).
    With ``must_exist=False`` a path found nowhere is the working directory's, where LF would create it."""
    p = user_path(value)
    looked = [p] if p.is_absolute() else [Path.cwd() / p] + ([base_dir / p] if base_dir is not None else [])
    looked = list(dict.fromkeys(_resolved(q) for q in looked))
    for q in looked:
        if q.exists():
            return q, looked
    return (None if must_exist else looked[0]), looked


def _looked(paths: list[Path]) -> Message:
    return message("lf.looked", paths=", ".join(str(p) for p in paths))


def user_path(value: Any) -> Path:
    """``value`` as a path with ``~`` expanded; a ``~user`` that does not exist stays literal (the checks of the
    path report it), where ``expanduser`` raises."""
    try:
        return Path(str(value)).expanduser()
    except RuntimeError:
        return Path(str(value))


def _resolved(p: Path) -> Path:
    """``p`` resolved; as written when it cannot be (a NUL byte: no file has that name, and the check says so)."""
    try:
        return p.resolve()
    except (OSError, ValueError):
        return p


def _resolve(path: str, base_dir: Path | None) -> str:
    p = user_path(path)
    return str(_resolved(base_dir / p)) if base_dir is not None and not p.is_absolute() else str(p)
