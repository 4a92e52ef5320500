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
    "pref_beta": "method.dpo.beta",
    "pref_loss": "method.dpo.loss_type",
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
_GALORE_BY_OPTIM = {
    "adamw_torch": "galore_adamw",
    "adamw_torch_fused": "galore_adamw",
    "adamw_8bit": "galore_adamw_8bit",
    "adamw_bnb_8bit": "galore_adamw_8bit",
    "paged_adamw_8bit": "galore_adamw_8bit",
    "adafactor": "galore_adafactor",
}
# Keys handled by code below (conversions), with the spec path used to name them in errors.
_CONVERTED: dict[str, str] = {
    "flash_attn": "model.attn_implementation",
    "rope_scaling": "model.rope_scaling",
    "lora_target": "method.lora.targets",
    "oft_target": "method.oft.targets",
    # "": not used to name spec paths in errors (optim names train.optimizer, galore_* train.low_rank)
    **dict.fromkeys(_OPTIMIZER_SWITCHES, ""),
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
    "fsdp": "",
    "fsdp_config": "",
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
# LF keys accepted with a note: they change nothing in a Studio training run. key -> why.
_INFERENCE = "an inference setting, not used in training"
_GENERATION = "a generation setting (chat, predict), not used in training"
_EXPORT = "an export setting (llamafactory-cli export): give the export YAML to studio merge --lf-yaml"
_DERIVED = "LF derives it; Studio derives its own"
_STUDIO_SETS = "Studio sets it"
_NOTED: dict[str, str] = {
    "overwrite_cache": "Studio's tokenisation cache is keyed by the data, the tokenizer and the settings, so a stale "
    "one is never reused",
    "logging_dir": "TensorBoard logs go to <output>/tensorboard",
    "overwrite_output_dir": "removed in transformers 5",
    "plot_loss": "the studio plots loss live",
    "disable_tqdm": "Studio logs progress to train.log and the page",
    "use_fast_tokenizer": "Studio loads the fast tokenizer",
    "low_cpu_mem_usage": "transformers 5 loads weights lazily",
    "print_param_status": "the run's events give trainable and total parameters",
    "cache_dir": "models come from the Hugging Face cache (HF_HOME)",
    "hf_hub_token": "set HF_TOKEN in the environment",
    "ms_hub_token": "Studio downloads from the Hugging Face hub",
    "om_hub_token": "Studio downloads from the Hugging Face hub",
    "preprocessing_batch_size": "Studio tokenizes in its own batches",
    "data_shared_file_system": "Studio tokenizes once per run",
    "include_effective_tokens_per_second": "the studio reports tokens/s",
    "include_tokens_per_second": "the studio reports tokens/s",
    "use_reentrant_gc": "Studio checkpoints without re-entrant autograd",
    "do_eval": "evaluation follows eval_strategy and val_size",
    **dict.fromkeys(
        "offload_folder use_kv_cache infer_backend infer_dtype vllm_maxlen vllm_gpu_util vllm_enforce_eager "
        "vllm_max_lora_rank vllm_config sglang_maxlen sglang_mem_fraction sglang_tp_size sglang_config "
        "sglang_lora_backend".split(),
        _INFERENCE,
    ),
    **dict.fromkeys(
        "do_sample temperature top_p top_k num_beams max_length max_new_tokens repetition_penalty length_penalty "
        "skip_special_tokens eval_num_beams sortish_sampler generation_max_length generation_num_beams "
        "generation_config".split(),
        _GENERATION,
    ),
    **dict.fromkeys(
        "export_dir export_size export_device export_quantization_bit export_quantization_dataset "
        "export_quantization_nsamples export_quantization_maxlen export_legacy_format export_hub_model_id".split(),
        _EXPORT,
    ),
    **dict.fromkeys("compute_dtype device_map model_max_length block_diag_attn".split(), _DERIVED),
    **dict.fromkeys(
        "remove_unused_columns label_names length_column_name local_rank ddp_backend ddp_find_unused_parameters "
        "gradient_checkpointing_kwargs".split(),
        _STUDIO_SETS,
    ),
}
# Options of a feature LF switches on with another key (use_galore, use_swanlab, fp8, ...): no effect while it is
# off, and refused through that key when it is on. Accepted silently.
_OPTIONS_OF_OFF_FEATURES = set(
    "swanlab_project swanlab_workspace swanlab_run_name swanlab_mode swanlab_api_key "
    "swanlab_logdir swanlab_lark_webhook_url swanlab_lark_secret asft_alpha eaft_alpha buffer_size fp8_backend "
    "fp8_enable_fsdp_float8_all_gather profiler_output_dir profiler_wait_steps profiler_warmup_steps "
    "profiler_active_steps profiler_repeat profiler_record_shapes profiler_profile_memory profiler_with_stack".split()
)
_PPO = "PPO and its reward_model are not supported: use stage dpo or kto (stage rm trains a reward model)"
_REF = (
    "a separate reference model is not supported: the reference of DPO and KTO is the model being trained "
    "(LoRA: its base)"
)
# LF features Studio does not have: key -> (LF's default, one line naming the feature and what to use instead).
# At its default (or null) the feature is off and the key is accepted; any other value is refused with the line.
_FEATURES: dict[str, tuple[Any, str]] = {
    "image_max_pixels": (
        589824,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "image_min_pixels": (
        1024,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "image_do_pan_and_scan": (
        False,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "crop_to_patches": (
        False,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "video_max_pixels": (
        65536,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "video_min_pixels": (
        256,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "video_fps": (2.0, "multimodal (image, video, audio) training is not supported: Studio trains text-only models"),
    "video_maxlen": (
        128,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "use_audio_in_video": (
        False,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "audio_sampling_rate": (
        16000,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "freeze_vision_tower": (
        True,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "freeze_multi_modal_projector": (
        True,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "freeze_language_model": (
        False,
        "multimodal (image, video, audio) training is not supported: Studio trains text-only models",
    ),
    "media_dir": (None, "multimodal (image, video, audio) training is not supported: Studio trains text-only models"),
    "create_new_adapter": (
        False,
        "a new adapter on top of adapter_name_or_path is not supported: merge the adapter first (studio merge)",
    ),
    "additional_target": (
        None,
        "modules trained beside LoRA (additional_target) are not supported: use finetuning_type freeze or full",
    ),
    "pref_ftx": (
        0.0,
        "this preference-loss option is not supported: Studio's DPO takes pref_beta and pref_loss (sigmoid/hinge/ipo)",
    ),
    "pref_bco_weight": (
        0.0,
        "this preference-loss option is not supported: Studio's DPO takes pref_beta and pref_loss (sigmoid/hinge/ipo)",
    ),
    "dpo_label_smoothing": (
        0.0,
        "this preference-loss option is not supported: Studio's DPO takes pref_beta and pref_loss (sigmoid/hinge/ipo)",
    ),
    "simpo_gamma": (
        0.5,
        "this preference-loss option is not supported: Studio's DPO takes pref_beta and pref_loss (sigmoid/hinge/ipo)",
    ),
    "ld_alpha": (
        None,
        "this preference-loss option is not supported: Studio's DPO takes pref_beta and pref_loss (sigmoid/hinge/ipo)",
    ),
    "ppo_buffer_size": (1, _PPO),
    "ppo_epochs": (4, _PPO),
    "ppo_score_norm": (False, _PPO),
    "ppo_target": (6.0, _PPO),
    "ppo_whiten_rewards": (False, _PPO),
    "reward_model": (None, _PPO),
    "reward_model_adapters": (None, _PPO),
    "reward_model_quantization_bit": (None, _PPO),
    "reward_model_type": ("lora", _PPO),
    "ref_model": (
        None,
        _REF,
    ),
    "ref_model_adapters": (
        None,
        _REF,
    ),
    "ref_model_quantization_bit": (
        None,
        _REF,
    ),
    "use_swanlab": (False, "SwanLab tracking is not supported: use report_to tensorboard or wandb"),
    "use_llama_pro": (False, "LLaMA Pro (use_llama_pro) is not supported: use finetuning_type freeze"),
    "use_mca": (
        False,
        "Megatron-Core (use_mca) training is not supported: use deepspeed or an accelerate FSDP config",
    ),
    "use_hyper_parallel": (
        False,
        "HyperParallel training is not supported: use deepspeed or an accelerate FSDP config",
    ),
    "hyper_parallel_args": (
        None,
        "HyperParallel training is not supported: use deepspeed or an accelerate FSDP config",
    ),
    "use_dft_loss": (False, "the DFT loss is not supported: Studio trains with cross-entropy"),
    "use_asft_loss": (False, "the ASFT loss is not supported: Studio trains with cross-entropy"),
    "use_eaft_loss": (False, "the EAFT loss is not supported: Studio trains with cross-entropy"),
    "compute_accuracy": (False, "token accuracy at evaluation is not computed: Studio reports the evaluation loss"),
    "disable_shuffling": (
        False,
        "a fixed data order (disable_shuffling) is not supported: Studio shuffles with the seed",
    ),
    "early_stopping_steps": (None, "early stopping is not supported: set num_train_epochs or max_steps"),
    "shift_attn": (False, "S^2-Attn (shift_attn) is not supported: use rope_scaling for long contexts"),
    "mixture_of_depths": (None, "mixture-of-depths is not supported: train the model as it is"),
    "use_unsloth": (False, "Unsloth is not supported: Studio trains with transformers and PEFT"),
    "use_unsloth_gc": (False, "Unsloth is not supported: Studio trains with transformers and PEFT"),
    "use_v1_kernels": (False, "LLaMA-Factory's v1 kernels are not supported"),
    "use_kt": (False, "KTransformers is not supported: Studio trains with transformers and PEFT"),
    "kt_weight_path": (None, "KTransformers is not supported: Studio trains with transformers and PEFT"),
    "kt_expert_checkpoint_path": (None, "KTransformers is not supported: Studio trains with transformers and PEFT"),
    "kt_use_lora_experts": (None, "KTransformers is not supported: Studio trains with transformers and PEFT"),
    "kt_lora_expert_num": (None, "KTransformers is not supported: Studio trains with transformers and PEFT"),
    "kt_lora_expert_intermediate_size": (
        None,
        "KTransformers is not supported: Studio trains with transformers and PEFT",
    ),
    "moe_aux_loss_coef": (None, "the MoE router loss coefficient is not supported: Studio keeps the model's own"),
    "upcast_layernorm": (
        False,
        "upcasting layer norms or the LM head to fp32 is not supported: set model.dtype float32 for a full fp32 model",
    ),
    "upcast_lmhead_output": (
        False,
        "upcasting layer norms or the LM head to fp32 is not supported: set model.dtype float32 for a full fp32 model",
    ),
    "train_from_scratch": (
        False,
        "training from random weights is not supported: Studio fine-tunes a pretrained model",
    ),
    "resize_vocab": (
        False,
        "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it is",
    ),
    "split_special_tokens": (
        False,
        "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it is",
    ),
    "add_tokens": (
        None,
        "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it is",
    ),
    "add_special_tokens": (
        None,
        "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it is",
    ),
    "new_special_tokens_config": (
        None,
        "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it is",
    ),
    "init_special_tokens": (
        "noise_init",
        "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it is",
    ),
    "quantization_device_map": (None, "a quantization device map is for inference: remove it"),
    "eval_on_each_dataset": (
        False,
        "evaluating each dataset separately is not supported: Studio evaluates the mixed validation split",
    ),
    "streaming": (False, "streaming datasets is not supported: Studio reads the dataset files"),
    "ignore_pad_token_for_loss": (
        True,
        "ignore_pad_token_for_loss false is not supported: padding never counts in Studio's loss",
    ),
    "default_system": (None, "default_system is not supported: put the system prompt in the data's system column"),
    "preserve_thinking": (
        False,
        "preserve_thinking (keep earlier turns' thoughts) is not supported: use enable_thinking",
    ),
    "ray_num_workers": (1, "Ray is not supported: use --accelerate-config for several GPUs or machines"),
    "ray_init_kwargs": (None, "Ray is not supported: use --accelerate-config for several GPUs or machines"),
    "master_addr": (None, "Ray is not supported: use --accelerate-config for several GPUs or machines"),
    "master_port": (None, "Ray is not supported: use --accelerate-config for several GPUs or machines"),
    "fp8": (False, "FP8 training is not supported: use bf16"),
    "enable_torch_profiler": (
        False,
        "the torch profiler is not supported: the studio's metrics show throughput and memory",
    ),
    "profile_modules": (None, "the torch profiler is not supported: the studio's metrics show throughput and memory"),
    "do_predict": (
        False,
        "prediction (do_predict, predict_with_generate) is not supported: try the trained model in the Chat tab",
    ),
    "predict_with_generate": (
        False,
        "prediction (do_predict, predict_with_generate) is not supported: try the trained model in the Chat tab",
    ),
}
_ACCELERATE = "pass an accelerate config (--accelerate-config)"
_FSDP_ARGS = "FSDP through training arguments is not supported: pass an accelerate FSDP config (--accelerate-config)"
_FEATURES.update(
    {
        "fsdp": (None, _FSDP_ARGS),
        "fsdp_config": (None, _FSDP_ARGS),
        "accelerator_config": (
            None,
            "accelerator_config is not supported: pass an accelerate config (--accelerate-config)",
        ),
        "parallelism_config": (
            None,
            "parallelism_config is not supported: pass an accelerate config (--accelerate-config)",
        ),
        "adapter_folder": (None, "loading adapters from a folder is not supported: merge them first (studio merge)"),
    }
)
# TrainingArguments of transformers 4 that LF passed through and transformers 5 removed: key -> (transformers 4's
# default, what to use instead). At the default: a note; otherwise refused.
_HF4_REMOVED: dict[str, tuple[Any, str]] = {
    "per_gpu_train_batch_size": (None, "use per_device_train_batch_size"),
    "per_gpu_eval_batch_size": (None, "use per_device_eval_batch_size"),
    "save_safetensors": (True, "transformers 5 always saves safetensors"),
    "use_mps_device": (False, "Studio trains on CUDA GPUs or the CPU"),
    "jit_mode_eval": (False, "remove it"),
    "fp16_opt_level": ("O1", "apex is gone: fp16 uses torch AMP"),
    "half_precision_backend": ("auto", "apex is gone: fp16 uses torch AMP"),
    "fp16_backend": ("auto", "apex is gone: fp16 uses torch AMP"),
    "tpu_num_cores": (None, "Studio trains on CUDA GPUs or the CPU"),
    "tpu_metrics_debug": (False, "Studio trains on CUDA GPUs or the CPU"),
    "past_index": (-1, "remove it"),
    "fsdp_min_num_params": (0, "pass an accelerate FSDP config (--accelerate-config)"),
    "fsdp_transformer_layer_cls_to_wrap": (None, "pass an accelerate FSDP config (--accelerate-config)"),
    "use_legacy_prediction_loop": (False, "remove it"),
    "include_inputs_for_metrics": (False, "use include_for_metrics"),
    "push_to_hub_model_id": (None, "use hub_model_id"),
    "push_to_hub_organization": (None, "use hub_model_id"),
    "push_to_hub_token": (None, "use hub_token"),
    "mp_parameters": ("", "remove it"),
    "torchdynamo": (None, "use torch_compile_backend"),
    "ray_scope": ("last", "remove it"),
}
# LLaMA-Factory's export YAML (``llamafactory-cli export``, ExportArguments + the model keys it reads) as
# ``studio merge --lf-yaml`` takes it: key -> LF's default. engine.lf.compat.lf_export_to_merge converts them; any
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
        self.missing: dict[str, str] = {}  # paths found nowhere: refused when the spec's files are checked
        self.names: dict[str, str] = {}  # spec path -> the LF key that set it, where several keys can (use_badam)

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


def _lf_path(value: Any, base_dir: Path | None, *, must_exist: bool = True) -> tuple[Path | None, list[Path]]:
    """A relative path as LLaMA-Factory reads it: from the working directory (LF's README runs every example from
    the repository root), then from the YAML's folder. Returns (the first that exists, or None; where it looked).
    With ``must_exist=False`` a path found nowhere is the working directory's, where LF would create it."""
    try:
        p = Path(str(value)).expanduser()
    except RuntimeError:  # ~user that does not exist: keep it literal
        p = Path(str(value))
    looked = [p] if p.is_absolute() else [Path.cwd() / p] + ([base_dir / p] if base_dir is not None else [])
    looked = list(dict.fromkeys(q.resolve() for q in looked))
    for q in looked:
        if q.exists():
            return q, looked
    return (None if must_exist else looked[0]), looked


def _looked(paths: list[Path]) -> str:
    return "looked in " + ", ".join(str(p) for p in paths)


def _resolve(path: str, base_dir: Path | None) -> str:
    try:
        p = Path(str(path)).expanduser()
    except RuntimeError:  # ~user that does not exist: keep it literal, the context check reports it
        p = Path(str(path))
    return str((base_dir / p).resolve()) if base_dir is not None and not p.is_absolute() else str(p)
