"""The catalog of the run spec's own messages: a stable key and an English template with named placeholders for
every cross-field, warning and context rule (``engine.spec.rules``) and for the spec loader (``engine.spec.schema``).

Light: stdlib only. ``message(key, **params)`` returns a ``Message``: a plain ``str`` holding the English text the
CLI prints and tests match, that also remembers its key and parameters, so the page can show the same message in
another language (``studio.i18n.localize`` holds the Chinese templates, keyed the same). Field errors raised by
pydantic become ``Message``s too, keyed ``pydantic.<error type>`` with pydantic's context (``ge``, ``expected``, ...)
as parameters and pydantic's English as text.
"""

from __future__ import annotations

from typing import Any

from engine.core.messages import Message, make


class RuleErrors(ValueError):
    """The cross-field errors of one spec, raised from the model validator. pydantic keeps this exception in the
    error's ``ctx``, so ``engine.spec.schema.pydantic_problems`` takes the (path, Message) pairs from it unchanged."""

    def __init__(self, problems: list[tuple[str, Message]]):
        self.problems = problems
        # One line per problem: messages may contain "; " but never a newline.
        super().__init__("\n".join(f"{path}: {msg}" for path, msg in problems))


MESSAGES: dict[str, str] = {
    # cross-field rules
    "quant_needs_lora": "{bits}-bit quantization trains only adapters: set method.finetuning to lora (QLoRA) or "
    "oft, or quantization bits to 0",
    "dora_on_8bit": "DoRA is not supported on 8-bit weights: use 4-bit or no quantization",
    "llama_pro_needs_freeze": "use_llama_pro trains the blocks `studio expand-model` inserted, with freeze tuning: "
    "set method.finetuning to freeze (it is {method})",
    "llama_pro_layers": "use_llama_pro: the model's {layers} layers are not a multiple of trainable_layers {n}; set "
    "it to the --num-expand the model was expanded with",
    "offload_optimizer_needs_zero": "optimizer offload needs ZeRO stage 1, 2 or 3: raise launch.deepspeed.zero_stage",
    "offload_param_needs_zero3": "parameter offload needs ZeRO stage 3: set launch.deepspeed.zero_stage to 3 or "
    "offload_param to none",
    "nvme_needs_path": "NVMe offload needs a folder: set launch.deepspeed.nvme_path",
    "zero3_8bit": "8-bit bitsandbytes weights cannot be sharded by ZeRO-3: use 4-bit (QLoRA), ZeRO stage 0-2, or "
    "quantization bits 0",
    "zero3_4bit_fp32": "4-bit with ZeRO-3 needs bfloat16 or float16 storage: set compute_dtype to bfloat16",
    "fsdp_8bit": "FSDP cannot shard 8-bit bitsandbytes weights: use 4-bit (QLoRA with FSDP) or another backend",
    "fsdp_4bit_fp32": "4-bit with FSDP needs bfloat16 or float16 storage: set compute_dtype to bfloat16",
    "processes_need_backend": "{n} processes need a distributed backend: set launch.backend to ddp, fsdp or "
    "deepspeed, or num_processes to 1",
    "machines_need_backend": "several machines need a distributed backend (ddp, fsdp, deepspeed)",
    "ddp_one_process": "ddp needs at least 2 processes in all (launch.num_processes x launch.num_machines is 1; "
    "accelerate refuses to start DDP with one): set launch.num_processes to 2 or more, or launch.backend to single",
    "gpu_ids_invalid": "GPU ids must be distinct and ≥ 0",
    "processes_exceed_gpus": "{n} processes per machine but only {gpus} GPU(s) chosen in launch.gpus: choose more "
    "GPUs or fewer processes",
    "gpus_on_cpu": "GPUs chosen but launch.device is cpu: clear launch.gpus or use auto/cuda",
    "main_ip_missing": "{n} machines need the rank-0 machine's address in launch.main_process_ip",
    "slurm_extra_line": "line {line} is not an sbatch option: write one option per line, e.g. --exclusive or "
    "#SBATCH --mail-type=END",
    "slurm_machine_rank": "on Slurm every node takes its rank from the allocation: leave launch.machine_rank at 0",
    "slurm_gpus_on_cpu": "{gpus} GPUs per node asked of Slurm but launch.device is cpu: set it to 0 or use auto/cuda",
    "ray_missing": 'launch.target ray needs Ray Train here: pip install "ray[train]" (the ray extra)',
    "ray_backend": "under Ray the workers train data parallel: set launch.backend to ddp (not {backend})",
    "ray_counts": "Ray places the workers: leave launch.{field} at 1 and set launch.ray.num_workers",
    "ray_gpus_on_cpu": "{gpus} GPUs per worker asked of Ray but launch.device is cpu: leave GPU out or use auto/cuda",
    "machine_rank_range": "machine rank {rank} must be below launch.num_machines ({n})",
    "fsdp_on_cpu": "FSDP needs GPUs: on CPU use ddp or deepspeed",
    "fp16_on_cpu": "fp16 mixed precision needs a GPU: use bf16 or fp32 on CPU",
    "fp8_cpu": "FP8 training needs an NVIDIA GPU of compute capability 8.9 or newer (Ada, Hopper): launch.device is "
    "cpu; turn train.fp8 off",
    "fp8_precision": "FP8 trains the layers it does not convert in bf16: set train.precision to bf16 or auto (not "
    "{precision})",
    "fp8_quantized": "FP8 converts full-precision linear layers; a {bits}-bit quantized model has none: turn "
    "train.fp8 off or set method.quantization.bits to 0",
    "fp8_missing": "FP8 backend {backend} is not installed: {install}",
    "fp8_fsdp_loading": "accelerate refuses torchao's FP8 with FSDP's RAM-efficient loading: set it to false",
    "mix_probs_count": "{probs} probabilities for {datasets} datasets: give one per dataset",
    "mix_probs_sum": "probabilities must be ≥ 0 and sum to 1",
    "mix_probs_concat": "probabilities apply to interleaving: set data.mix to interleave_under or interleave_over, "
    "or clear data.mix_probs",
    "dataset_twice": "a dataset is listed twice",
    "packing_preference": "packing applies to sft and pt, not {stage}: turn data.packing off",
    "kto_batch": "kto needs at least 2 samples per device batch (TRL estimates its KL term from each prompt paired "
    "with another answer of the same batch), not {n}: raise train.per_device_batch_size (lower "
    "train.gradient_accumulation to keep the effective batch)",
    "group_by_length_packing": "grouping by length and packing exclude each other (packed rows are already full): "
    "turn off data.group_by_length or data.packing",
    "report_to_missing": "{target} is not installed here: pip install {target}, or choose tensorboard or none",
    "template_unknown": "unknown template {name!r}: choose one of {names}",
    "liger_cpu": "Liger kernels run on CUDA GPUs only: set train.liger_kernel to auto or off on CPU",
    "liger_missing": "the liger-kernel package is not installed: pip install liger-kernel, or set train.liger_kernel "
    "to auto or off",
    "padding_free_packing": "packing already fills rows without padding: set data.padding_free to auto or off, or "
    "turn packing off",
    "packed_attention_sdpa": "per_sample attention is an sdpa path; {attn} attention cannot take it "
    "(flash_attention_2 attends per sample by itself): set model.packed_attention to auto or mask, or "
    "model.attn_implementation to sdpa",
    "packed_attention_model": "per_sample attention covers the model types {known}, not {model_type}: set "
    "model.packed_attention to auto or mask",
    "packed_attention_sliding": "this {model_type} model uses sliding-window attention, which per_sample attention "
    "does not compute: set model.packed_attention to auto or mask",
    "padding_free_dpo": "padding-free dpo batches need flash_attention_2 (TRL's padding_free); {attn} attention "
    "cannot keep the pairs apart: set data.padding_free to auto or off, or model.attn_implementation to "
    "flash_attention_2",
    "group_by_length_preference": "grouping by length applies to sft and pt, not {stage}: turn "
    "data.group_by_length off",
    "padding_free_stage": "padding-free batches apply to sft, pt and dpo, not {stage}: set data.padding_free to "
    "auto or off",
    "report_to_none": "'none' cannot be combined with other trackers",
    "lora_all_alone": "'all' already covers every linear layer: give 'all' alone or a list of names",
    "save_best_needs_eval": "save strategy 'best' keeps the checkpoint with the best evaluation loss: set "
    "data.val_size above 0 (or data.eval_datasets) and an eval strategy, or save by steps",
    "val_size_rows_whole": "data.val_size {value:g}: from 1 up it is a number of rows, so it must be whole (or "
    "below 1 for a fraction)",
    "eval_datasets_and_val_size": "data.eval_datasets and data.val_size both choose the evaluation rows: keep one "
    "(set data.val_size to 0, or clear data.eval_datasets)",
    "mask_history_train_on_prompt": "mask_history trains only the last answer and train_on_prompt trains the "
    "prompts too: turn one off",
    "mask_history_stage": "mask_history applies to stage sft (multi-turn answers), not {stage}: turn it off",
    "tool_format_auto": "tool_format {tool_format} replaces a named template's tool format; template auto renders "
    "with the model's own chat template: choose a named template or set tool_format to template",
    "loraplus_needs_lora": "LoRA+ sets the learning rate of LoRA's B matrices: it needs method.finetuning lora "
    "(not {method}); clear loraplus_lr_ratio",
    "loraplus_optimizer": "LoRA+ builds its optimizer from the class train.optimizer names, and {optimizer} builds "
    "its own: choose adamw_torch, adamw_8bit, paged_adamw_8bit, adafactor or sgd, or clear loraplus_lr_ratio",
    "pissa_needs_lora": "PiSSA initialises LoRA adapters: it needs method.finetuning lora (not {method}); turn "
    "pissa_init off",
    "pissa_dpo": "PiSSA moves the principal weights into the adapter, so {stage}'s reference (the base with the "
    "adapter off) would not be the model you started from: turn pissa_init off for {stage}",
    "pissa_quantized": "PiSSA decomposes the base's float weights, not {bits}-bit ones (peft refuses them): turn "
    "pissa_init off, or quantization bits to 0",
    "pissa_convert_needs_init": "pissa_convert converts a PiSSA adapter: turn method.lora.pissa_init on, or "
    "pissa_convert off",
    "oft_rank_or_block": "OFT takes its rank or its block size, exactly one of them non-zero (rank {rank}, block "
    "size {size}): set the other to 0",
    "optimizer_needs_full": "{optimizer} updates the full weights of the model: set method.finetuning to full or "
    "freeze (not {method}), or choose another optimizer",
    "optimizer_backend": "{optimizer} builds its own optimizer, which {backend} does not take: use launch.backend "
    "single or ddp, or another optimizer",
    "apollo_proj_type": "APOLLO projects std, right or left, not {proj_type}: set train.low_rank.proj_type",
    "layerwise_one_process": "layer-wise GaLore / APOLLO runs in one process (this run has {n}): turn "
    "train.low_rank.layerwise off or use one process",
    "layerwise_accumulation": "layer-wise GaLore / APOLLO steps during backward, so it cannot accumulate "
    "{n} micro-steps: set gradient_accumulation to 1 or turn layerwise off",
    "badam_one_process": "BAdam is set up for one process here (this run has {n}): use one process or another "
    "optimizer",
    "optimizer_missing": "the {optimizer} optimizer needs a package that is not installed: pip install {package}",
    "extra_arg_has_field": "{name} is a Studio setting: set {field} instead of train.extra_args",
    "extra_arg_studio": "{name} is set by Studio and cannot be given in train.extra_args",
    "extra_arg_unknown": "{name} is not a TrainingArguments field of transformers {version}",
    "extra_arg_value": "{name}: {problem}",
    # warnings
    "offload_param_slow": "parameter offload slows training a lot; try optimizer offload first",
    "backend_one_process": "{backend} with one process and no CPU offload gains nothing over single",
    "checkpointing_short": "on short sequences checkpointing costs ~30% speed and saves little",
    "lr_high_full": "{lr:g} is high for full fine-tuning (typical: 1e-5 to 5e-5)",
    "lr_low_lora": "{lr:g} is low for LoRA (typical: 1e-4 to 5e-4)",
    "alpha_rank_high": "alpha/rank above 8 scales updates strongly; typical is 1-2",
    "single_many_gpus": "single-process runs use one GPU; choose ddp, fsdp or deepspeed to use them all",
    "eval_without_split": "no validation split (data.val_size is 0): eval_steps has no effect",
    "split_without_eval": "validation data is set (data.val_size or data.eval_datasets) but train.eval_strategy is "
    "no: it is never evaluated (a val_size split is still held out of training); set eval_strategy to steps or epoch",
    "deepspeed_8bit_optimizer": "DeepSpeed uses its own optimizer; the 8-bit optimizer is ignored",
    "remote_code": "the model's own Python code will run: only for models you trust",
    # context rules
    "model_no_folder": "no model folder at {path}",
    "model_no_config": "{path} has no config.json: not a transformers model folder",
    "model_unresolved": "cannot read this model's config: {problem}",
    "model_not_downloadable": "the run could not download its model: {problem}",
    "cutoff_over_positions": "{cutoff} exceeds the model's maximum positions ({limit}): lower data.cutoff_len or "
    "set model.rope_scaling",
    "lora_targets_unknown": "{bad} name no module of a {model_type} model; its linear modules are {known} (or 'all')",
    "freeze_modules_unknown": "{bad} name no module of a {model_type} decoder layer; choose from {known}",
    "freeze_layers_too_many": "{n} trainable layers but the model has {layers}",
    "resume_no_checkpoint": "no checkpoint at {path} (a checkpoint folder holds trainer_state.json); give a "
    "checkpoint-N folder or 'last'",
    "registry_missing": "no dataset_info.json in {folder}",
    "registry_bad_json": "{path} is not valid JSON: {error}",
    "registry_not_mapping": "{path} must map dataset names to entries, got {type}",
    "dataset_unknown": "'{name}' is not in {path} (known: {known})",
    "dataset_unknown_empty": "'{name}' is not in {path} (known: none)",
    "dataset_not_entry": "'{name}' in {path} is not an entry (a JSON object)",
    "pairs_needed": "{stage} needs preference pairs, but '{name}' has no chosen/rejected columns "
    '(set "ranking": true with chosen/rejected in dataset_info.json, or pick another dataset)',
    "pairs_need_pair_stage": "'{name}' holds preference pairs, which stage {stage} cannot train on: use stage dpo "
    "or rm, or another dataset",
    "kto_needs_tag": "kto needs answers tagged desirable or not, but '{name}' maps no kto_tag column (in "
    "dataset_info.json set its columns.kto_tag to the column holding true/false, or pick another dataset)",
    "kto_not_pairs": "'{name}' holds preference pairs (ranking), not answers tagged for kto: use stage dpo or rm, "
    "or a dataset with a kto_tag column",
    "tags_need_kto": "'{name}' holds kto data (column '{column}' tags each answer desirable or not), which stage "
    "{stage} would train as if every answer were good: use stage kto, or another dataset",
    # the spec as a whole (engine.spec.schema) and the checks at submit (engine.runs.registry)
    "unknown_field": "unknown field (not part of the run spec)",
    "schema_newer": "schema version {version} was written by a newer Studio (this one reads up to {supported}): "
    "upgrade Studio to load it",
    "schema_unsupported": "unsupported schema version {version!r} (this Studio reads up to {supported})",
    "spec_not_mapping": "expected a mapping of spec groups, got {type}",
    "spec_unreadable": "cannot read {path}: {reason}",
    "spec_bad_yaml": "{path} is not valid YAML: {error}",
    "output_refused": "not here: {reason}",
    "output_is_file": "cannot create {path}: {probe} is a file, not a folder",
    "output_not_writable": "cannot write to {probe} (permission denied): choose another folder",
    # notify (engine.spec.watch_group)
    "notify_bad_address": "not an email address: {address!r}",
    "notify_email_needs_smtp": "emails need an SMTP server: set notify.smtp_host (or clear notify.email_to)",
    "notify_env_missing": "the environment variable {name} is not set here: this notification will not be sent",
    # stage grpo (engine.spec.grpo_group)
    "grpo_no_reward": "stage grpo needs at least one reward function: add one to method.grpo.rewards",
    "grpo_python_needs_file": "a python reward needs its file and function: set file (a .py file) and function "
    "(its name)",
    "grpo_reward_name_twice": "two rewards are named '{name}': give each a different name (their curves are told "
    "apart by it)",
    "grpo_bad_pattern": "not a valid regular expression: {error}",
    "grpo_batch_groups": "the generation batch ({batch} = batch size x accumulation x processes) must hold whole "
    "groups of {n} completions: make it a multiple of method.grpo.num_generations, or change the group size",
    "grpo_vllm_cpu": "vLLM generates on a GPU only: set method.grpo.generation_backend to transformers on the CPU",
    "grpo_vllm_missing": "vLLM is not installed here (pip install vllm on a GPU machine): set "
    "method.grpo.generation_backend to transformers",
    "grpo_vllm_no_gpu": "vLLM generates on a GPU and this machine has none: set method.grpo.generation_backend to "
    "transformers",
    "grpo_file_unreadable": "cannot read the reward file {path}: {reason}",
    "grpo_file_syntax": "the reward file {path} is not valid Python: {error}",
    "pref_ftx_simpo": "an SFT loss weight (LLaMA-Factory's pref_ftx) is added to SimPO only (TRL's cpo_alpha): set "
    "method.dpo.loss_type to simpo, or ftx to 0 (loss {loss})",
    "grpo_model_needs_path": "a model reward needs its reward model: set model to a Studio rm run's id or folder, "
    "or a sequence-classification model folder",
    "grpo_model_missing": "no reward model at {path}: give a Studio rm run's id or folder, or a model folder",
    "grpo_model_spec_unreadable": "cannot read the run's spec {path}: {error}",
    "grpo_model_unfinished": "the run {path} has no final weights yet: use a finished rm run (or one of its "
    "checkpoints' folders)",
    "grpo_model_not_weights": "{path} holds no adapter (adapter_config.json) and no model (config.json)",
    "grpo_model_not_rm": "{path} is not a reward model (stage rm trains one: a sequence classifier with one score); "
    "a language model's weights cannot score completions",
    "grpo_model_base_missing": "the reward model's adapter {path} is on the base model '{base}', which is not a "
    "local folder here",
    "grpo_no_function": "{path} defines no top-level function '{name}' (functions found: {found})",
    "loss_stage": "the {loss} loss weights sft's answer tokens: set method.stage to sft, or train.loss to "
    "cross_entropy (stage {stage})",
    "asft_pissa": "asft's reference is the base with the adapter off, which PiSSA has changed: turn off "
    "method.lora.pissa_init, or pick another train.loss",
    "asft_zero3": "asft keeps a frozen copy of the base as its reference, which ZeRO-3 would partition: use ZeRO "
    "stage 0-2, LoRA / OFT (the base with the adapter off is the reference), or another train.loss",
    "liger_loss": "Liger's fused cross-entropy never makes the logits the {loss} loss weights: set "
    "train.liger_kernel to auto or off, or train.loss to cross_entropy",
}


def message(key: str, /, **params: Any) -> Message:
    """The spec catalog's English text for ``key`` with ``params`` filled in."""
    return make(MESSAGES, key, **params)


def field_error(error_type: str, text: str, ctx: dict[str, Any] | None) -> Message:
    """A pydantic field error as a Message: pydantic's English, keyed by its error type, its context as params."""
    params = {k: v for k, v in (ctx or {}).items() if k != "error"}
    return Message(text, f"pydantic.{error_type}", params)
