"""The run spec's rules beyond single fields: cross-field errors, warnings for legal but unwise settings, and
context rules that read files (the model's ``config.json``, the dataset registry and its rows).

Light: stdlib only (engine.core.workspace is imported where used). Every rule returns (field path, message) pairs
whose message says what to do; ``engine.spec.schema`` turns them into errors. Messages come from the catalog in
``engine.spec.messages`` (a key and an English template each), so the page can show them in Chinese.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from engine.core import belongings, member_secrets
from engine.core.messages import Message
from engine.data.rows import PREFERENCE_STAGES, stage_data_problem
from engine.data.template_table import TEMPLATE_NAMES
from engine.machine.kernels import liger_installed, per_sample_refusal
from engine.models import ms_models
from engine.models.access import launch_problem as download_launch_problem
from engine.models.resolve import looks_local as _looks_local
from engine.models.resolve import model_path, resolve_config, resolve_model
from engine.spec.grpo_group import grpo_context, grpo_errors
from engine.spec.hf_args import extra_arg_problem
from engine.spec.launch_group import ray_errors
from engine.spec.messages import message
from engine.spec.train_group import LOW_RANK_OPTIMIZERS, fp8_errors, loss_errors
from engine.spec.watch_group import watch_errors, watch_warnings

# The rules take a RunSpec (engine.spec.schema), whose validator calls them: named here without importing it, so
# the two modules do not import each other even for type checking.
RunSpec = Any

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


def cross_field_errors(spec: RunSpec) -> list[tuple[str, Message]]:
    """Rules between fields that need no files. Each is (field path, message with the fix)."""
    m, t, ln, d = spec.method, spec.train, spec.launch, spec.data
    errors: list[tuple[str, Message]] = []
    if m.quantization.bits and m.finetuning not in ("lora", "oft"):  # peft wraps bitsandbytes layers for both
        errors.append(("method.quantization.bits", message("quant_needs_lora", bits=m.quantization.bits)))
    if m.freeze.use_llama_pro and m.finetuning != "freeze":
        errors.append(("method.freeze.use_llama_pro", message("llama_pro_needs_freeze", method=m.finetuning)))
    if m.lora.use_dora and m.quantization.bits == 8:
        errors.append(("method.lora.use_dora", message("dora_on_8bit")))
    if ln.backend == "deepspeed":
        ds = ln.deepspeed
        if ds.offload_optimizer != "none" and ds.zero_stage < 1:
            errors.append(("launch.deepspeed.offload_optimizer", message("offload_optimizer_needs_zero")))
        if ds.offload_param != "none" and ds.zero_stage != 3:
            errors.append(("launch.deepspeed.offload_param", message("offload_param_needs_zero3")))
        if "nvme" in (ds.offload_optimizer, ds.offload_param) and not ds.nvme_path:
            errors.append(("launch.deepspeed.nvme_path", message("nvme_needs_path")))
        # QLoRA 4-bit shards under ZeRO-3 (the seed's worked example) with bf16/fp16 4-bit storage; 8-bit cannot.
        if m.quantization.bits == 8 and ds.zero_stage == 3:
            errors.append(("method.quantization.bits", message("zero3_8bit")))
        if m.quantization.bits == 4 and ds.zero_stage == 3 and m.quantization.compute_dtype == "float32":
            errors.append(("method.quantization.compute_dtype", message("zero3_4bit_fp32")))
    if ln.backend == "fsdp" and m.quantization.bits == 8:
        errors.append(("method.quantization.bits", message("fsdp_8bit")))
    if ln.backend == "fsdp" and m.quantization.bits == 4 and m.quantization.compute_dtype == "float32":
        errors.append(("method.quantization.compute_dtype", message("fsdp_4bit_fp32")))
    if ln.backend == "single" and ln.num_processes > 1:
        errors.append(("launch.num_processes", message("processes_need_backend", n=ln.num_processes)))
    if ln.backend == "single" and ln.num_machines > 1:
        errors.append(("launch.num_machines", message("machines_need_backend")))
    if ln.backend == "ddp" and spec.world_size < 2 and ln.target != "ray":  # accelerate refuses DDP of one process
        errors.append(("launch.num_processes", message("ddp_one_process")))
    if ln.gpus is not None:
        if len(set(ln.gpus)) != len(ln.gpus) or any(g < 0 for g in ln.gpus):
            errors.append(("launch.gpus", message("gpu_ids_invalid")))
        elif ln.num_processes > len(ln.gpus):
            errors.append(
                ("launch.num_processes", message("processes_exceed_gpus", n=ln.num_processes, gpus=len(ln.gpus)))
            )
        if ln.device == "cpu" and ln.gpus:
            errors.append(("launch.gpus", message("gpus_on_cpu")))
    if ln.num_machines > 1 and ln.target == "local":  # on Slurm the main address is the allocation's first node
        if not ln.main_process_ip.strip():
            errors.append(("launch.main_process_ip", message("main_ip_missing", n=ln.num_machines)))
    if ln.machine_rank >= ln.num_machines:
        errors.append(("launch.machine_rank", message("machine_rank_range", rank=ln.machine_rank, n=ln.num_machines)))
    if ln.target == "slurm":
        errors += slurm_problems(ln)
    errors += ray_errors(spec)
    if ln.backend == "fsdp" and ln.device == "cpu":
        errors.append(("launch.backend", message("fsdp_on_cpu")))
    if t.precision == "fp16" and ln.device == "cpu":
        errors.append(("train.precision", message("fp16_on_cpu")))
    if d.mix_probs is not None:
        if len(d.mix_probs) != len(d.datasets):
            errors.append(
                ("data.mix_probs", message("mix_probs_count", probs=len(d.mix_probs), datasets=len(d.datasets)))
            )
        elif not all(p >= 0 for p in d.mix_probs) or abs(sum(d.mix_probs) - 1.0) > 1e-6:  # `not all` also catches NaN
            errors.append(("data.mix_probs", message("mix_probs_sum")))
        if d.mix == "concat":
            errors.append(("data.mix_probs", message("mix_probs_concat")))
    if len(set(d.datasets)) != len(d.datasets):
        errors.append(("data.datasets", message("dataset_twice")))
    if d.packing and m.stage in PREFERENCE_STAGES:
        errors.append(("data.packing", message("packing_preference", stage=m.stage)))
    if d.group_by_length and d.packing:
        errors.append(("data.group_by_length", message("group_by_length_packing")))
    if d.group_by_length and m.stage in PREFERENCE_STAGES:
        errors.append(("data.group_by_length", message("group_by_length_preference", stage=m.stage)))
    if m.stage == "kto" and t.per_device_batch_size < 2:
        # TRL estimates KTO's KL term from each prompt paired with another row's answer of the same batch
        errors.append(("train.per_device_batch_size", message("kto_batch", n=t.per_device_batch_size)))
    if "none" in spec.output.report_to and len(spec.output.report_to) > 1:
        errors.append(("output.report_to", message("report_to_none")))
    if m.lora.targets and "all" in m.lora.targets and len(m.lora.targets) > 1:
        errors.append(("method.lora.targets", message("lora_all_alone")))
    if t.liger_kernel == "on" and spec.launch.device == "cpu":
        errors.append(("train.liger_kernel", message("liger_cpu")))
    elif t.liger_kernel == "on" and not liger_installed():
        errors.append(("train.liger_kernel", message("liger_missing")))
    if d.padding_free == "on" and d.packing:
        errors.append(("data.padding_free", message("padding_free_packing")))
    if d.padding_free == "on" and m.stage == "dpo" and spec.model.attn_implementation != "flash_attention_2":
        errors.append(("data.padding_free", message("padding_free_dpo", attn=spec.model.attn_implementation)))
    if spec.model.packed_attention == "per_sample" and spec.model.attn_implementation != "sdpa":
        attn = spec.model.attn_implementation
        errors.append(("model.packed_attention", message("packed_attention_sdpa", attn=attn)))
    if d.padding_free == "on" and m.stage in ("kto", "rm", "grpo"):
        errors.append(("data.padding_free", message("padding_free_stage", stage=m.stage)))
    if t.save_strategy == "best" and ((d.val_size == 0 and not d.eval_datasets) or t.eval_strategy == "no"):
        errors.append(("train.save_strategy", message("save_best_needs_eval")))
    if d.val_size >= 1 and not float(d.val_size).is_integer():
        errors.append(("data.val_size", message("val_size_rows_whole", value=d.val_size)))
    if d.eval_datasets and d.val_size > 0:
        errors.append(("data.eval_datasets", message("eval_datasets_and_val_size")))
    if len(set(d.eval_datasets)) != len(d.eval_datasets):
        errors.append(("data.eval_datasets", message("dataset_twice")))
    if d.mask_history and d.train_on_prompt:
        errors.append(("data.mask_history", message("mask_history_train_on_prompt")))
    if d.mask_history and m.stage != "sft":
        errors.append(("data.mask_history", message("mask_history_stage", stage=m.stage)))
    if d.tool_format != "template" and d.template == "auto":
        errors.append(("data.tool_format", message("tool_format_auto", tool_format=d.tool_format)))

    errors += method_problems(spec)
    errors += loss_errors(spec) + fp8_errors(spec)
    errors += grpo_errors(spec)
    if m.dpo.ftx and not (m.stage == "dpo" and m.dpo.loss_type == "simpo"):
        errors.append(("method.dpo.ftx", message("pref_ftx_simpo", loss=m.dpo.loss_type)))
    if d.template not in TEMPLATE_NAMES:
        errors.append(("data.template", message("template_unknown", name=d.template, names=", ".join(TEMPLATE_NAMES))))
    if t.extra_args:
        for name, value in t.extra_args.items():
            problem = extra_arg_problem(str(name), value)
            if problem is not None:
                errors.append((f"train.extra_args.{name}", message(problem[0], **problem[1])))
    errors += watch_errors(spec.health, spec.notify)
    return errors


# Optimizers from packages Studio does not install: spec value -> (module to import, what to pip install).
OPTIONAL_OPTIMIZERS: dict[str, tuple[str, str]] = {
    "galore_adamw": ("galore_torch", "galore-torch"),
    "galore_adamw_8bit": ("galore_torch", "galore-torch"),
    "galore_adafactor": ("galore_torch", "galore-torch"),
    "apollo_adamw": ("apollo_torch", "apollo-torch"),
    "adam_mini": ("adam_mini", "adam-mini"),
    "muon": ("muon", "git+https://github.com/KellerJordan/Muon"),
    "badam": ("badam", "badam"),
}
# Optimizers that need the full weights (LLaMA-Factory refuses them with LoRA too)
_FULL_WEIGHT_OPTIMIZERS = ("galore_adamw", "galore_adamw_8bit", "galore_adafactor", "apollo_adamw", "badam")


def optimizer_package(name: str) -> tuple[str, str] | None:
    """(module, pip name) of the optional package ``train.optimizer`` needs when it is not installed, else None."""
    need = OPTIONAL_OPTIMIZERS.get(name)
    return need if need is not None and importlib.util.find_spec(need[0]) is None else None


def method_problems(spec: RunSpec) -> list[tuple[str, Message]]:
    """LoRA+, PiSSA, OFT and the optimizers beyond AdamW: what each needs of the rest of the spec."""
    m, t, ln = spec.method, spec.train, spec.launch
    lora, out = m.lora, []
    if lora.loraplus_lr_ratio is not None and m.finetuning != "lora":
        out.append(("method.lora.loraplus_lr_ratio", message("loraplus_needs_lora", method=m.finetuning)))
    if lora.loraplus_lr_ratio is not None and t.optimizer in OPTIONAL_OPTIMIZERS:
        out.append(("method.lora.loraplus_lr_ratio", message("loraplus_optimizer", optimizer=t.optimizer)))
    if lora.pissa_init and m.finetuning != "lora":
        out.append(("method.lora.pissa_init", message("pissa_needs_lora", method=m.finetuning)))
    if lora.pissa_init and m.finetuning == "lora":
        if m.stage in ("dpo", "kto"):
            out.append(("method.lora.pissa_init", message("pissa_dpo", stage=m.stage)))
        if m.quantization.bits:  # peft's PiSSA decomposes float weights only, on any device
            out.append(("method.lora.pissa_init", message("pissa_quantized", bits=m.quantization.bits)))
    if lora.pissa_convert and not lora.pissa_init:
        out.append(("method.lora.pissa_convert", message("pissa_convert_needs_init")))
    if m.finetuning == "oft" and (m.oft.rank == 0) == (m.oft.block_size == 0):
        out.append(("method.oft.block_size", message("oft_rank_or_block", rank=m.oft.rank, size=m.oft.block_size)))
    if m.oft.targets and "all" in m.oft.targets and len(m.oft.targets) > 1:
        out.append(("method.oft.targets", message("lora_all_alone")))
    if t.low_rank.targets and "all" in t.low_rank.targets and len(t.low_rank.targets) > 1:
        out.append(("train.low_rank.targets", message("lora_all_alone")))
    opt = t.optimizer
    if opt in _FULL_WEIGHT_OPTIMIZERS and m.adapter:
        out.append(("train.optimizer", message("optimizer_needs_full", optimizer=opt, method=m.finetuning)))
    if opt in OPTIONAL_OPTIMIZERS and ln.backend in ("deepspeed", "fsdp"):
        out.append(("train.optimizer", message("optimizer_backend", optimizer=opt, backend=ln.backend)))
    if opt == "apollo_adamw" and t.low_rank.proj_type not in ("std", "right", "left"):
        out.append(("train.low_rank.proj_type", message("apollo_proj_type", proj_type=t.low_rank.proj_type)))
    if t.low_rank.layerwise and opt in LOW_RANK_OPTIMIZERS:
        if spec.world_size > 1:
            out.append(("train.low_rank.layerwise", message("layerwise_one_process", n=spec.world_size)))
        if t.gradient_accumulation > 1:
            out.append(("train.low_rank.layerwise", message("layerwise_accumulation", n=t.gradient_accumulation)))
    if opt == "badam" and spec.world_size > 1:
        out.append(("train.optimizer", message("badam_one_process", n=spec.world_size)))
    return out


def spec_warnings(spec: RunSpec) -> list[tuple[str, Message]]:
    """Legal but unwise combinations: shown, never blocking."""
    m, t, ln, d = spec.method, spec.train, spec.launch, spec.data
    warns: list[tuple[str, Message]] = []
    if ln.backend == "deepspeed" and ln.deepspeed.offload_param != "none":
        warns.append(("launch.deepspeed.offload_param", message("offload_param_slow")))
    # ddp with one process is an error; DeepSpeed / FSDP offloading to CPU is what one process gains from them
    ds = ln.deepspeed
    offloads = (ln.backend == "deepspeed" and "cpu" in (ds.offload_optimizer, ds.offload_param)) or (
        ln.backend == "fsdp" and ln.fsdp.offload_params
    )
    if ln.backend in ("fsdp", "deepspeed") and spec.world_size == 1 and not offloads:
        warns.append(("launch.backend", message("backend_one_process", backend=ln.backend)))
    if (
        t.gradient_checkpointing == "on"
        and m.finetuning == "lora"
        and t.per_device_batch_size == 1
        and d.cutoff_len <= 512
    ):
        warns.append(("train.gradient_checkpointing", message("checkpointing_short")))
    if t.learning_rate > 1e-3 and m.finetuning == "full":
        warns.append(("train.learning_rate", message("lr_high_full", lr=t.learning_rate)))
    if m.finetuning == "lora" and t.learning_rate < 1e-5:
        warns.append(("train.learning_rate", message("lr_low_lora", lr=t.learning_rate)))
    if m.lora.alpha / max(m.lora.rank, 1) > 8 and m.finetuning == "lora":
        warns.append(("method.lora.alpha", message("alpha_rank_high")))
    if ln.backend == "single" and ln.device != "cpu" and ln.gpus and len(ln.gpus) > 1:
        warns.append(("launch.gpus", message("single_many_gpus")))
    if d.val_size == 0 and not d.eval_datasets and t.eval_steps != 500:
        warns.append(("train.eval_steps", message("eval_without_split")))
    if (d.val_size > 0 or d.eval_datasets) and t.eval_strategy == "no":
        warns.append(("train.eval_strategy", message("split_without_eval")))
    if ln.backend == "deepspeed" and t.optimizer in ("adamw_8bit", "paged_adamw_8bit"):
        warns.append(("train.optimizer", message("deepspeed_8bit_optimizer")))
    if spec.model.trust_remote_code:
        warns.append(("model.trust_remote_code", message("remote_code")))
    # the run's wrapper gets these from this environment, and in team mode from the account's own secrets
    warns += watch_warnings(spec.notify, member_secrets.environ())
    return warns


# ----------------------------------------------------------------------------------------------- context rules
# Problems only this machine's cache and network decide (the message keys): a check for another machine
# (``studio validate|preview --gpus N``) says them as notes instead of refusing.
HERE_ONLY = frozenset({"model_not_downloadable"})


def read_model_config(name_or_path: str, revision: str | None = None) -> dict | None:
    """The model's config.json: from a local folder, the Hugging Face cache, the hub (config only) or Studio's
    table of published configs (``engine.models.resolve``); None when none has it."""
    return resolve_config(name_or_path, revision).config


def _user_path(path: str) -> Path:
    """``~`` expanded; a ``~user`` that does not exist stays literal instead of raising RuntimeError."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)


def resolve_dataset_dir(spec: RunSpec) -> Path:
    if spec.data.dataset_dir:
        return _user_path(spec.data.dataset_dir)
    from engine.core import workspace

    return workspace.data_dir()


def check_context(spec: RunSpec) -> list[tuple[str, Message]]:
    """Rules that read files: the model folder and its config, the dataset registry and columns."""
    errors: list[tuple[str, Message]] = []
    name = spec.model.name_or_path
    mpath = model_path(name)
    looks_local = _looks_local(name)
    resolved = resolve_model(spec.model)
    on_ms = spec.model.hub == "modelscope"
    if looks_local and not mpath.is_dir():
        errors.append(("model.name_or_path", message("model_no_folder", path=name)))
    elif looks_local and not (mpath / "config.json").is_file():
        errors.append(("model.name_or_path", message("model_no_config", path=name)))
    elif not resolved.found and resolved.problem is not None:
        # a hub id that is nowhere: not found on the hub, gated, or unknown while the hub cannot be asked
        errors.append(("model.name_or_path", message("model_unresolved", problem=resolved.problem)))
    elif on_ms and not looks_local and (why := ms_models.launch_problem(name, spec.model.revision)):
        # a ModelScope id: in its cache, or listed by ModelScope (the run downloads it), else one line why not
        errors.append(("model.name_or_path", message("model_not_downloadable", problem=why)))
    elif (
        not on_ms and not looks_local and (why := download_launch_problem(name, spec.model.revision, resolved.problem))
    ):
        # planned from the cache's config or Studio's table, but the run could not get the weights
        errors.append(("model.name_or_path", message("model_not_downloadable", problem=why)))
    cfg = resolved.config
    if cfg:
        max_pos = cfg.get("max_position_embeddings")
        factor = spec.model.rope_scaling.factor if spec.model.rope_scaling else 1.0
        if isinstance(max_pos, int) and spec.data.cutoff_len > max_pos * factor:
            limit = f"{max_pos}{' x ' + str(factor) if factor != 1 else ''}"
            errors.append(
                ("data.cutoff_len", message("cutoff_over_positions", cutoff=spec.data.cutoff_len, limit=limit))
            )
        if spec.model.packed_attention == "per_sample":
            key, params = per_sample_refusal(spec.model.attn_implementation, cfg)
            if key and key != "packed_attention_sdpa":  # a non-sdpa attention is the cross-field rule's
                errors.append(("model.packed_attention", message(key, **params)))
        model_type = cfg.get("model_type")
        known = ARCH_LINEAR_MODULES.get(str(model_type or ""))
        if known and spec.method.adapter:
            group = spec.method.finetuning  # lora or oft: their targets name modules the same way
            bad = [t for t in getattr(spec.method, group).targets if t != "all" and t not in known]
            if bad:
                errors.append(
                    (
                        f"method.{group}.targets",
                        message(
                            "lora_targets_unknown", bad=", ".join(bad), model_type=model_type, known=", ".join(known)
                        ),
                    )
                )
        if known and spec.method.finetuning == "freeze":
            bad = [t for t in spec.method.freeze.trainable_modules if t not in known and t not in _LAYER_PARTS]
            if bad:
                errors.append(
                    (
                        "method.freeze.trainable_modules",
                        message(
                            "freeze_modules_unknown",
                            bad=", ".join(bad),
                            model_type=model_type,
                            known=", ".join(known + _LAYER_PARTS),
                        ),
                    )
                )
            layers = cfg.get("num_hidden_layers")
            if isinstance(layers, int) and spec.method.freeze.trainable_layers > layers:
                errors.append(
                    (
                        "method.freeze.trainable_layers",
                        message("freeze_layers_too_many", n=spec.method.freeze.trainable_layers, layers=layers),
                    )
                )
            elif (
                isinstance(layers, int)
                and spec.method.freeze.use_llama_pro
                and layers % spec.method.freeze.trainable_layers
            ):
                errors.append(
                    (
                        "method.freeze.trainable_layers",
                        message("llama_pro_layers", n=spec.method.freeze.trainable_layers, layers=layers),
                    )
                )
    want = spec.train.resume_from
    if want and want != "last" and not (_user_path(want) / "trainer_state.json").is_file():
        errors.append(("train.resume_from", message("resume_no_checkpoint", path=want)))
    missing = optimizer_package(spec.train.optimizer)  # checked without importing it, like the trackers below
    if missing is not None:
        errors.append(
            ("train.optimizer", message("optimizer_missing", optimizer=spec.train.optimizer, package=missing[1]))
        )
    for target in spec.output.report_to:  # found out after the data loads otherwise; checked without importing it
        if target != "none" and importlib.util.find_spec(target) is None:
            errors.append(("output.report_to", message("report_to_missing", target=target)))
    errors += _check_datasets(spec)
    errors += _check_output_dir(spec)
    errors += grpo_context(spec)
    return errors


def _check_output_dir(spec: RunSpec) -> list[tuple[str, Message]]:
    """The output folder: inside the workspace (or an allowed root), owned by no workspace folder, nor the spec's base
    model or dataset folder (engine.core.folders). Other runs' folders are the registry's check, at submit."""
    if not spec.output.output_dir:
        return []
    from engine.core import folders
    from engine.core.messages import message as core_message

    extra = []
    model = model_path(spec.model.name_or_path)
    if model.is_dir():
        extra.append((model.resolve(), core_message("workspace.owner_model", path=model.resolve()), True))
    ddir = resolve_dataset_dir(spec).resolve()
    extra.append((ddir, core_message("workspace.owner_data", path=ddir), True))
    problem = folders.output_problem(spec.output.output_dir, extra)
    return [("output.output_dir", message("output_refused", reason=problem))] if problem else []


_LAYER_PARTS = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm"]


def _check_datasets(spec: RunSpec) -> list[tuple[str, Message]]:
    ddir = resolve_dataset_dir(spec)
    info_path = ddir / "dataset_info.json"
    if not info_path.is_file():
        return [("data.dataset_dir", message("registry_missing", folder=ddir))]
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [("data.dataset_dir", message("registry_bad_json", path=info_path, error=exc))]
    if not isinstance(info, dict):
        return [("data.dataset_dir", message("registry_not_mapping", path=info_path, type=type(info).__name__))]
    errors: list[tuple[str, Message]] = []
    lists = {"data.datasets": spec.data.datasets, "data.eval_datasets": spec.data.eval_datasets}
    for field, name in [(f, n) for f, names in lists.items() for n in names]:
        entry = info.get(name) if belongings.usable_dataset(ddir, name) else None  # another member's: unknown
        if entry is None:
            known = ", ".join(belongings.usable_datasets(ddir, info))
            errors.append(
                (
                    field,
                    message("dataset_unknown", name=name, path=info_path, known=known)
                    if known
                    else message("dataset_unknown_empty", name=name, path=info_path),
                )
            )
            continue
        if not isinstance(entry, dict):
            errors.append((field, message("dataset_not_entry", name=name, path=info_path)))
            continue
        columns = entry.get("columns")
        tag = columns.get("kto_tag") if isinstance(columns, dict) else None
        kind = stage_data_problem(spec.method.stage, name, bool(entry.get("ranking")), tag)
        if kind is not None:
            errors.append((field, message(kind[0], **kind[1])))
    return errors + _image_problems(spec, info)


def _image_problems(spec: RunSpec, info: dict) -> list[tuple[str, Message]]:
    """Datasets with images train a vision-language model (a config with a vision_config) with stage sft, or dpo
    with one of TRL DPOTrainer's losses (ORPO / SimPO run on text-only trainers)."""
    from engine.data.messages import message as data_message

    names = [
        n
        for n in [*spec.data.datasets, *spec.data.eval_datasets]
        if isinstance(info.get(n), dict)
        and isinstance(info[n].get("columns"), dict)
        and info[n]["columns"].get("images")
    ]
    if not names:
        return []
    shown = ", ".join(names)
    if spec.method.stage not in ("sft", "dpo"):
        return [("method.stage", data_message("data.images_stage", names=shown, stage=spec.method.stage))]
    loss = spec.method.dpo.loss_type
    if spec.method.stage == "dpo" and loss in ("orpo", "simpo"):
        return [("method.dpo.loss_type", data_message("data.images_loss", names=shown, loss=loss))]
    config = resolve_model(spec.model).config
    if config is not None and not config.get("vision_config"):
        return [("data.datasets", data_message("data.images_text_model", names=shown, model=spec.model.name_or_path))]
    return []


SBATCH_OPTION = re.compile(r"^(#SBATCH\s+)?--?[A-Za-z][A-Za-z0-9_-]*(=\S.*|\s+\S.*)?$")


def slurm_problems(ln) -> list[tuple[str, Message]]:
    """A Slurm launch's own rules: sbatch lines that are options, no fixed machine rank, no GPUs asked on CPU."""
    out: list[tuple[str, Message]] = []
    for i, line in enumerate(ln.slurm.extra_sbatch, 1):
        if "\n" in line or "\r" in line or not SBATCH_OPTION.match(line.strip()):
            out.append(("launch.slurm.extra_sbatch", message("slurm_extra_line", line=i)))
    if ln.machine_rank != 0:
        out.append(("launch.machine_rank", message("slurm_machine_rank")))
    if ln.device == "cpu" and ln.slurm.gpus_per_node:
        out.append(("launch.slurm.gpus_per_node", message("slurm_gpus_on_cpu", gpus=ln.slurm.gpus_per_node)))
    return out
