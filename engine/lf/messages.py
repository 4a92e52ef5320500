"""The catalog of the LLaMA-Factory import's and export's notes and refusals (``engine.lf.compat``,
``engine.lf.launch_settings``, the key tables of ``engine.lf.keys``): a stable key and an English template, made into
``engine.core.messages.Message`` by ``message``, so the Train tab can show a pasted YAML's notes and refused keys in
its language (``studio.i18n.lf`` holds the Chinese). The CLI prints the English as it is. Light: stdlib.

The tables of ``engine.lf.keys`` name their reasons by key (``_NOTED``: "lf.noted_*", ``_FEATURES``:
"lf.refused_*", ``_HF4_REMOVED``: "lf.hf4_*"); a test checks each is in this catalog.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make

MESSAGES: dict[str, str] = {
    # ---- notes: a key accepted that changes nothing, or a value Studio chose (engine.lf.to_spec._lf_import)
    "lf.noted": "{key}: accepted, ignored ({why})",
    "lf.hf4_noted": "{key}: accepted, ignored (removed in transformers 5)",
    # why a key of _NOTED changes nothing (the {why} of lf.noted)
    "lf.noted_overwrite_cache": "Studio's tokenisation cache is keyed by the data, the tokenizer and the settings, "
    "so a stale one is never reused",
    "lf.noted_logging_dir": "TensorBoard logs go to <output>/tensorboard",
    "lf.noted_plot_loss": "the studio plots loss live",
    "lf.noted_disable_tqdm": "Studio logs progress to train.log and the page",
    "lf.noted_use_fast_tokenizer": "Studio loads the fast tokenizer",
    "lf.noted_low_cpu_mem_usage": "transformers 5 loads weights lazily",
    "lf.noted_print_param_status": "the run's events give trainable and total parameters",
    "lf.noted_cache_dir": "models come from the Hugging Face cache (HF_HOME)",
    "lf.noted_hf_hub_token": "set HF_TOKEN in the environment",
    "lf.noted_other_hub": "Studio downloads from the Hugging Face hub",
    "lf.noted_ms_hub_token": "ModelScope's client reads its token from MODELSCOPE_API_TOKEN: set it in the "
    "environment (a token is never written into a spec)",
    "lf.noted_preprocessing_batch_size": "Studio tokenizes in its own batches",
    "lf.noted_data_shared_file_system": "Studio tokenizes once per run",
    "lf.noted_tokens_per_second": "the studio reports tokens/s",
    "lf.noted_use_reentrant_gc": "Studio checkpoints without re-entrant autograd",
    "lf.noted_do_eval": "evaluation follows eval_strategy and val_size",
    "lf.noted_processor_template": "template {template}: the model's processor renders the conversation with its "
    "own chat template (template auto)",
    "lf.noted_video": "video training is not supported (a dataset with videos is refused when it is checked); "
    "images train",
    "lf.noted_inference": "an inference setting, not used in training",
    "lf.noted_generation": "a generation setting (chat, predict), not used in training",
    "lf.noted_export": "an export setting (llamafactory-cli export): give the export YAML to studio merge --lf-yaml",
    "lf.noted_derived": "LF derives it; Studio derives its own",
    "lf.noted_studio_sets": "Studio sets it",
    "lf.cutoff_default": "cutoff_len: not set; LLaMA-Factory's default {default} is above the model's {max_pos} "
    "positions, so {max_pos} is used",
    "lf.no_dataset_dir": "dataset_dir not set and no data/dataset_info.json ({looked}): datasets resolve in the "
    "Studio workspace's data folder",
    "lf.output_inside": "output_dir: {raw} is written inside the workspace, at {inside} (LLaMA-Factory would write "
    "{found}; allow that folder's root with STUDIO_OUTPUT_ROOTS to write there)",
    "lf.deepspeed_one_process": "deepspeed without an accelerate config: one process; set launch.num_processes for "
    "more",
    "lf.tokenized_ignored": "tokenized_path: accepted, ignored (Studio caches tokenized data itself; nothing is "
    "written to {path})",
    "lf.rope_factor": "rope_scaling: factor {factor} (LF derives it from the local config.json)",
    "lf.packing_neat": "packing: Studio packs without attention across samples (LF's neat_packing)",
    "lf.packing_pt": "packing: false with stage pt: Studio cuts each text into blocks of cutoff_len (LF truncates it)",
    "lf.checkpointing": "gradient_checkpointing: LLaMA-Factory turns it on by default; Studio uses auto (off when the "
    "memory plan fits the GPUs with a 10% margin, which trains faster): set disable_gradient_checkpointing to choose",
    "lf.kto_batch": "per_device_train_batch_size: 1 x gradient_accumulation_steps {accum} becomes 2 x {half} (the "
    "same effective batch): TRL's KTO estimates its KL term from answers of the same device batch",
    # where a path was looked for (a parameter of the messages around it)
    "lf.looked": "looked in {paths}",
    "lf.not_found": "not found: {looked}",
    # ---- refusals: why a key cannot run in Studio (engine.lf.keys._Import.bad)
    "lf.not_supported": "not supported by Studio",
    "lf.unknown_key": "not a LLaMA-Factory training key (LLaMA-Factory refuses it too)",
    "lf.value_problem": "{problem}",
    "lf.hf4_removed": "removed in transformers 5 (installed: {version}): {instead}",
    "lf.stage_ppo": "PPO (stage ppo) is not supported: use stage dpo with preference pairs or kto with tagged answers "
    "(stage rm trains a reward model)",
    "lf.dataset_dir_online": "{ddir}: datasets named by hub id without a dataset_info.json are not supported: "
    "register them in a dataset_info.json with hf_hub_url (Studio reads it from the hub)",
    "lf.no_folder": "no folder {ddir} ({looked})",
    "lf.deepspeed_not_found": "DeepSpeed config {path} not found ({looked})",
    "lf.adapter_refused": "training on top of an existing adapter ({where}) is not supported: merge it into the base "
    "model (studio merge) and train the merged model",
    "lf.tokenized_refused": "{path} holds a dataset LLaMA-Factory tokenized, which Studio cannot load: remove "
    "tokenized_path (Studio tokenizes dataset itself and caches it)",
    "lf.do_train": "only training runs are supported (do_train: true)",
    "lf.quantization_method": "only bitsandbytes (bnb) quantization is supported",
    "lf.freeze_negative": "negative values (train the first layers) are not supported",
    "lf.interleave_probs": "{value!r} is not a comma list of numbers",
    "lf.bf16_and_fp16": "bf16 and fp16 are both true: keep one",
    "lf.report_to_all": "'all' is not supported: name the trackers (tensorboard, wandb, mlflow, trackio, "
    "swanlab) or none",
    "lf.two_optimizers": "{first} and {second} are both true: LLaMA-Factory takes one optimizer; keep one",
    "lf.two_losses": "{first} and {second} are both true: LLaMA-Factory trains with {first} alone; keep one",
    "lf.galore_optim": "GaLore comes as AdamW, 8-bit AdamW or Adafactor, not {optim}: set optim to adamw_torch, "
    "adamw_8bit or adafactor",
    "lf.apollo_scale_front": "the norm-growth limiter before scaling (apollo_scale_front) is not an option of "
    "transformers' APOLLO: remove it",
    # what to do instead of a transformers 4 key that transformers 5 removed (the {instead} of lf.hf4_removed)
    "lf.hf4_per_device_train": "use per_device_train_batch_size",
    "lf.hf4_per_device_eval": "use per_device_eval_batch_size",
    "lf.hf4_safetensors": "transformers 5 always saves safetensors",
    "lf.hf4_device": "Studio trains on CUDA GPUs or the CPU",
    "lf.hf4_remove": "remove it",
    "lf.hf4_apex": "apex is gone: fp16 uses torch AMP",
    "lf.hf4_include_for_metrics": "use include_for_metrics",
    "lf.hf4_hub_model_id": "use hub_model_id",
    "lf.hf4_hub_token": "use hub_token",
    "lf.hf4_torch_compile": "use torch_compile_backend",
    # LF features Studio does not have, refused when switched on (engine.lf.keys._FEATURES)
    "lf.refused_multimodal": "this multimodal option (pan-and-scan, patch crops, audio, media_dir) is not supported: "
    "Studio trains on images with paths relative to the dataset folder",
    "lf.refused_new_adapter": "a new adapter on top of adapter_name_or_path is not supported: merge the adapter first "
    "(studio merge)",
    "lf.refused_additional_target": "modules trained beside LoRA (additional_target) are not supported: use "
    "finetuning_type freeze or full",
    "lf.refused_pref_option": "this preference-loss option is not supported: Studio's DPO takes pref_beta and "
    "pref_loss (sigmoid/hinge/ipo/orpo/simpo), simpo_gamma and pref_ftx (SimPO)",
    "lf.no_grpo": "LLaMA-Factory has no GRPO stage: a grpo spec cannot be written as an LF YAML (keep the Studio "
    "spec)",
    "lf.refused_ppo": "PPO and its reward_model are not supported: use stage dpo or kto (stage rm trains a reward "
    "model)",
    "lf.refused_openmind": "downloads from the openMind hub (Modelers, modelers.cn) are not supported: download the "
    "model there yourself (openmind_hub's snapshot_download) and set model_name_or_path to its folder, or use the "
    "Hugging Face hub (HF_ENDPOINT for a mirror) or ModelScope (use_modelscope_hub: true)",
    "lf.refused_openmind_env": "USE_OPENMIND_HUB is set, so LLaMA-Factory would download from the openMind hub, "
    "which Studio does not: unset it (the Hugging Face hub, or use_modelscope_hub: true) or give a local folder",
    "lf.refused_ref_model": "a separate reference model is not supported: the reference of DPO and KTO is the model "
    "being trained (LoRA: its base)",
    "lf.refused_swanlab": "use_swanlab is not imported: add swanlab to report_to (Studio runs it in local mode)",
    "lf.refused_mca": "Megatron-Core (use_mca) training is not supported: use deepspeed or an accelerate FSDP config",
    "lf.refused_hyper_parallel": "HyperParallel training is not supported: use deepspeed or an accelerate FSDP config",
    "lf.refused_compute_accuracy": "token accuracy at evaluation is not computed: Studio reports the evaluation loss",
    "lf.refused_disable_shuffling": "a fixed data order (disable_shuffling) is not supported: Studio shuffles with "
    "the seed",
    "lf.refused_early_stopping": "early stopping is not supported: set num_train_epochs or max_steps",
    "lf.refused_shift_attn": "S^2-Attn (shift_attn) is not supported: use rope_scaling for long contexts",
    "lf.refused_mixture_of_depths": "mixture-of-depths needs LF's MoD package (pip install mixture-of-depth), whose "
    "latest release (1.2.0) does not import with transformers 5 (it imports TRANSFORMERS_CACHE, since removed) and "
    "copies transformers 4's model code: train the model as it is",
    "lf.refused_unsloth": "Unsloth is not supported: Studio trains with transformers and PEFT",
    "lf.refused_v1_kernels": "LLaMA-Factory's v1 kernels are not supported",
    "lf.refused_kt": "KTransformers is not supported: Studio trains with transformers and PEFT",
    "lf.refused_moe_aux_loss": "the MoE router loss coefficient is not supported: Studio keeps the model's own",
    "lf.refused_upcast": "upcasting layer norms or the LM head to fp32 is not supported: set model.dtype float32 for "
    "a full fp32 model",
    "lf.refused_from_scratch": "training from random weights is not supported: Studio fine-tunes a pretrained model",
    "lf.refused_tokens": "adding or resizing tokens is not supported: Studio trains with the model's tokenizer as it "
    "is",
    "lf.refused_quantization_device_map": "a quantization device map is for inference: remove it",
    "lf.refused_eval_each_dataset": "evaluating each dataset separately is not supported: Studio evaluates the mixed "
    "validation split",
    "lf.refused_streaming": "streaming datasets is not supported: Studio reads the dataset files",
    "lf.refused_ignore_pad": "ignore_pad_token_for_loss false is not supported: padding never counts in Studio's loss",
    "lf.refused_default_system": "default_system is not supported: put the system prompt in the data's system column",
    "lf.refused_preserve_thinking": "preserve_thinking (keep earlier turns' thoughts) is not supported: use "
    "enable_thinking",
    "lf.ray_target": "ray keys: launch.target ray (LLaMA-Factory's USE_RAY=1): Ray Train's workers on the cluster at "
    "RAY_ADDRESS, else on a local Ray",
    "lf.noted_ray_master": "Ray Train sets its workers' rendezvous address itself",
    "lf.refused_ray_filesystem": "Ray's results go to a folder every node sees: set ray_storage_path to one (s3 and "
    "gcs storage are not supported)",
    "lf.fp8_msamp": "MS-AMP is not among the installed accelerate's FP8 backends: set fp8_backend to torchao, te or "
    "auto",
    "lf.fp8_all_gather": "fp8_enable_fsdp_float8_all_gather: accepted, no effect (float8 all-gather is an FSDP2 hook; "
    "Studio's FSDP is version 1, which gathers the weights in bf16)",
    "lf.fsdp_option": "{value!r} is not an FSDP option Studio takes (full_shard, shard_grad_op, hybrid_shard, "
    "no_shard, offload, auto_wrap)",
    "lf.fsdp_layers": "{n} layer classes to wrap: Studio wraps one (launch.fsdp.layer_cls_to_wrap)",
    "lf.fsdp_key_alone": "has an effect only with fsdp set (transformers' FSDP through training arguments)",
    "lf.fsdp_one_process": "fsdp without an accelerate config: one process; set launch.num_processes to the GPUs it "
    "shards over",
    "lf.refused_profiler": "the torch profiler is not supported: the studio's metrics show throughput and memory",
    "lf.refused_predict": "prediction (do_predict, predict_with_generate) does not train: run the YAML with "
    "`studio train FILE` (an evaluation writing LLaMA-Factory's prediction files) or use the Evaluate tab",
    "lf.refused_fsdp_args": "FSDP through training arguments is not supported: pass an accelerate FSDP config "
    "(--accelerate-config)",
    "lf.refused_accelerator_config": "accelerator_config is not supported: pass an accelerate config "
    "(--accelerate-config)",
    "lf.refused_parallelism_config": "parallelism_config is not supported: pass an accelerate config "
    "(--accelerate-config)",
    "lf.refused_adapter_folder": "loading adapters from a folder is not supported: merge them first (studio merge)",
    # ---- the accelerate config and DeepSpeed JSON (engine.lf.launch_settings)
    "lf.ds_unreadable": "cannot read DeepSpeed config {path}: {error}",
    "lf.ds_not_object": "{path} is not a JSON object",
    "lf.ds_zero_value": "{value!r} is not supported (only 'auto' or the default)",
    "lf.ds_precision": "deepspeed.{key}: precision comes from bf16/fp16 in the training args",
    "lf.ds_batch": "deepspeed.{key}: the batch comes from the training args",
    "lf.acc_distributed_type": "{value} is not supported (NO, MULTI_GPU, MULTI_CPU, FSDP, DEEPSPEED)",
    "lf.acc_processes": "{total} processes do not divide over {machines} machines",
    "lf.acc_gpu_ids": "{value!r} is not 'all' or a comma list of GPU ids",
    "lf.acc_mixed_precision": "{value} is not supported (no, bf16, fp16)",
    "lf.acc_precision_differs": "accelerate mixed_precision {value} differs from the training args: the training "
    "args win",
    "lf.acc_not_mapping": "must be a mapping",
    "lf.acc_studio_sets": "{key}: accepted, Studio sets it",
    "lf.acc_fsdp_fixed": "{value!r} is not supported (Studio uses {fixed!r})",
    # ---- reading the YAML (engine.lf.compat.load_any, lf_text_to_spec)
    "lf.cannot_read": "cannot read {path}: {error}",
    "lf.bad_yaml_file": "{path} is not valid YAML: {error}",
    "lf.bad_yaml": "not valid YAML: {error}",
    "lf.accelerate_for_lf": "--accelerate-config is for LLaMA-Factory YAML; a Studio spec carries launch settings "
    "under launch:",
    "lf.not_mapping_file": "{path} is not a mapping",
    "lf.not_lf_yaml": "not a LLaMA-Factory training YAML (no model_name_or_path, stage, dataset, template, ... keys)",
    "lf.accelerate_not_mapping": "not a mapping of accelerate keys",
    # ---- an export YAML as a merge (engine.lf.merge_yaml.lf_export_to_merge, studio merge --lf-yaml)
    "lf.export_not_mapping": "not a mapping of LLaMA-Factory keys (key: value lines)",
    "lf.export_training_key": "{key}: accepted, ignored (a training or inference setting, not used by a merge)",
    "lf.export_unknown_key": "not a LLaMA-Factory key (LLaMA-Factory refuses it too)",
    "lf.export_gptq_bits": "{value!r}: Studio's GPTQ export writes 4 or 8 bits (gptq-4bit, gptq-8bit)",
    "lf.export_gptq_adapters": "quantizing at export takes a model without adapters (LLaMA-Factory refuses it too: "
    '"Please merge adapters before quantizing the model."): merge first, then quantize the merged folder',
    "lf.export_gptq_count": "{value!r}: needs a whole number of at least 1",
    "lf.export_gptq_no_dataset": "export_quantization_bit needs a calibration file here (LLaMA-Factory needs one too: "
    '"Quantization dataset is necessary for exporting.")',
    "lf.export_gptq_dataset": "{name}: no such file ({looked}); a file of 'text' rows, as LLaMA-Factory's "
    "data/c4_demo.jsonl",
    "lf.export_gptq_legacy": "export_legacy_format: accepted, ignored by the GPTQ export (gptqmodel saves "
    "safetensors)",
    "lf.export_gptq_size": "export_size: accepted, ignored by the GPTQ export (gptqmodel shards the folder itself)",
    "lf.export_quantized": "merging into a quantized model is not supported (LLaMA-Factory refuses it too): remove "
    "quantization_bit; Studio merges onto the full-precision base",
    "lf.export_finetuning": "{finetuning}: Studio merges LoRA adapters (lora) or re-exports full / freeze models",
    "lf.export_adapters_need_lora": "adapters need finetuning_type lora (not {finetuning})",
    "lf.export_trust_remote_code": "trust_remote_code: accepted; the merge loads the model with transformers' own "
    "classes and runs no code from the model folder",
    "lf.export_template": "template: {template} accepted, ignored (the merged folder keeps the chat template of the "
    "adapter's tokenizer, else the base's)",
    "lf.export_no_model": "missing: name the base model (a folder, or a hub id in the Hugging Face cache)",
    "lf.export_adapter_missing": "{name}: not found ({looked})",
    "lf.export_no_dir": "missing: name the folder to write the merged model to",
    "lf.export_size": "{value!r}: give the shard size in GB, a number above 0 (e.g. 2)",
    "lf.export_device": "{value!r}: choose cpu or auto",
    "lf.export_device_cpu": "export_device: auto, and no GPU is visible: the merge runs on the CPU",
    "lf.export_legacy": "{value!r}: true (.bin files) or false (safetensors)",
    "lf.export_no_config": "{path} has no config.json: not a model folder",
    "lf.export_model_missing": "{name}: not a local model folder ({looked}) nor a model in the Hugging Face cache: "
    "download it first (studio download)",
    # ---- a spec written as LF training YAML as Studio runs it (engine.lf.export_run, studio export-lf)
    "lf.export_precision": "train.precision auto written as {precision} ({why})",
    "lf.export_precision_run": "what run {run} trained with",
    "lf.export_precision_here": "what a run on this machine uses: {device}",
    "lf.export_template_named": "data.template auto written as {name}: it renders like the model's own chat template",
    "lf.export_template_default": "data.template auto written as default: the model has no chat template of its own",
    "lf.export_template_parsed": "data.template auto: template left out, so LLaMA-Factory parses the model's own chat "
    "template (no named template renders like it)",
    "lf.export_template_unknown": "data.template auto: the tokenizer of {model} is not here; template left out, so "
    "LLaMA-Factory parses the model's chat template (empty when it has none)",
    "lf.export_written_as_ran": "Studio resolved these as it runs the spec",
}


def message(key: str, /, **params: Any) -> Message:
    return make(MESSAGES, key, **params)
