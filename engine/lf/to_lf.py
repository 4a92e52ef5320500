"""LLaMA-Factory training args out: a RunSpec written as LF's training YAML (+ accelerate config), with the fields LF
has no key for listed.

Light: yaml, json, engine.lf.keys / launch / messages / to_spec and engine.spec.schema only (never torch). What is lost
is found by reading the written args back (engine.lf.to_spec) and comparing. ``studio export-lf``, which resolves what
Studio decides at launch first, is engine.commands.export_lf; the page's "Save as LF YAML" calls it too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from engine.lf.keys import (
    _DIRECT,
    _FLASH_OUT,
    _GALORE_BY_OPTIM,
    _LOSS_SWITCHES,
    _LOW_RANK_KEYS,
    _OPTIMIZER_SWITCHES,
)
from engine.lf.launch_settings import _accelerate_out
from engine.lf.messages import message
from engine.lf.to_spec import _lf_import
from engine.spec.schema import RunSpec, SpecError, spec_to_dict


def workspace_path(path: str) -> Path:
    """A spec path as Studio reads it: absolute as written, relative from the workspace ($STUDIO_HOME)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    from engine.core import workspace

    return workspace.home() / p


def spec_to_lf(spec: RunSpec) -> tuple[dict, dict]:
    """A spec as LLaMA-Factory training args + an accelerate config in the shape of the seed's examples.

    Precision 'auto' is written as bf16 (LF has no 'auto'); model.dtype, quantization compute dtype, launch.device
    cpu and share_gpus have no LF key and are left out. Stage pt without packing is written as packing: false, with
    which LF truncates each text at cutoff_len where Studio cuts it into blocks.
    """
    m, d, t, o = spec.method, spec.data, spec.train, spec.output
    if m.stage == "grpo":  # LLaMA-Factory has no GRPO stage
        raise SpecError([("method.stage", message("lf.no_grpo"))])
    args: dict[str, Any] = {"model_name_or_path": spec.model.name_or_path}
    if spec.model.revision != "main":
        args["model_revision"] = spec.model.revision
    if spec.model.hub == "modelscope":
        args["use_modelscope_hub"] = True
    if spec.model.trust_remote_code:
        args["trust_remote_code"] = True
    args["flash_attn"] = _FLASH_OUT[spec.model.attn_implementation]
    if spec.model.rope_scaling:
        args["rope_scaling"] = spec.model.rope_scaling.type
    args.update({"stage": m.stage, "do_train": True, "finetuning_type": m.finetuning})
    if m.finetuning == "lora":
        if m.quantization.bits:
            args.update(
                {
                    "quantization_bit": m.quantization.bits,
                    "quantization_type": m.quantization.quant_type,
                    "double_quantization": m.quantization.double_quant,
                }
            )
        args.update(
            {
                "lora_rank": m.lora.rank,
                "lora_alpha": m.lora.alpha,
                "lora_dropout": m.lora.dropout,
                "lora_target": ",".join(m.lora.targets),
                "use_rslora": m.lora.use_rslora,
                "use_dora": m.lora.use_dora,
            }
        )
        if m.lora.loraplus_lr_ratio is not None:
            args["loraplus_lr_ratio"] = m.lora.loraplus_lr_ratio
            args["loraplus_lr_embedding"] = m.lora.loraplus_lr_embedding
        if m.lora.pissa_init:
            args.update(pissa_init=True, pissa_iter=m.lora.pissa_iter, pissa_convert=m.lora.pissa_convert)
    elif m.finetuning == "oft":
        args.update(
            {
                "oft_rank": m.oft.rank,
                "oft_block_size": m.oft.block_size,
                "oft_target": ",".join(m.oft.targets),
                "module_dropout": m.oft.dropout,
            }
        )
    elif m.finetuning == "freeze":
        args["freeze_trainable_layers"] = m.freeze.trainable_layers
        args["freeze_trainable_modules"] = ",".join(m.freeze.trainable_modules) or "all"
        if m.freeze.extra_modules:
            args["freeze_extra_modules"] = ",".join(m.freeze.extra_modules)
        if m.freeze.use_llama_pro:
            args["use_llama_pro"] = True
    if m.stage == "dpo":
        args.update({"pref_beta": m.dpo.beta, "pref_loss": m.dpo.loss_type})
        if m.dpo.loss_type == "simpo":
            args.update({"simpo_gamma": m.dpo.simpo_gamma, "pref_ftx": m.dpo.ftx})
    if m.stage == "kto":
        args.update(
            {
                "pref_beta": m.kto.beta,
                "kto_chosen_weight": m.kto.desirable_weight,
                "kto_rejected_weight": m.kto.undesirable_weight,
            }
        )
    args["dataset"] = ",".join(d.datasets)
    if d.dataset_dir:
        args["dataset_dir"] = d.dataset_dir
    if d.mix != "concat":
        args["mix_strategy"] = d.mix
    if d.mix_probs:
        args["interleave_probs"] = ",".join(f"{p:g}" for p in d.mix_probs)
    args.update({"template": d.template, "cutoff_len": d.cutoff_len})
    if d.max_samples is not None:
        args["max_samples"] = d.max_samples
    if d.val_size:
        args["val_size"] = int(d.val_size) if d.val_size >= 1 else d.val_size  # LF: a whole number is rows
    if d.eval_datasets:
        args["eval_dataset"] = ",".join(d.eval_datasets)
    if d.mask_history:
        args["mask_history"] = True
    if not d.enable_thinking:
        args["enable_thinking"] = False
    if d.tool_format != "template":
        args["tool_format"] = d.tool_format
    args.update(
        {
            "packing": d.packing,
            "neat_packing": d.packing and m.stage != "pt",  # LF's pt packing is concatenation, as ours
            "train_on_prompt": d.train_on_prompt,
            "preprocessing_num_workers": d.preprocessing_workers,
        }
    )
    if d.group_by_length:
        args["group_by_length"] = True
    args["dataloader_num_workers"] = d.dataloader_workers
    if o.output_dir:  # absolute: Studio reads a relative one from the workspace, LF from the working directory
        args["output_dir"] = str(workspace_path(o.output_dir))
    if o.run_name:
        args["run_name"] = o.run_name
    args.update(
        {
            "logging_steps": t.logging_steps,
            "save_steps": t.save_steps,
            "eval_steps": t.eval_steps,
            "save_total_limit": t.save_total_limit,
            "num_train_epochs": t.num_epochs,
            "max_steps": t.max_steps,
            "per_device_train_batch_size": t.per_device_batch_size,
            "gradient_accumulation_steps": t.gradient_accumulation,
            "learning_rate": t.learning_rate,
            "lr_scheduler_type": t.lr_scheduler,
            "warmup_ratio": t.warmup_ratio,
            "warmup_steps": t.warmup_steps,
            "weight_decay": t.weight_decay,
            "optim": t.optimizer,
            "max_grad_norm": t.max_grad_norm,
            "save_strategy": t.save_strategy,
            "save_only_model": t.save_only_model,
            "eval_strategy": t.eval_strategy,
            "include_num_input_tokens_seen": t.count_input_tokens,
            "ddp_timeout": spec.launch.ddp_timeout,
        }
    )
    args.update(_optimizer_out(t))
    if spec.launch.target == "ray":  # LF's Ray launcher: the file runs with USE_RAY=1 (a comment says so)
        args.update(_ray_out(spec))
    if t.loss != "cross_entropy":  # asft_alpha / eaft_alpha: _DIRECT's, where not at the default
        args[{v: k for k, v in _LOSS_SWITCHES.items()}[t.loss]] = True
    if t.fp8:
        args.update(fp8=True, fp8_backend=t.fp8_backend)
    if t.per_device_eval_batch_size is not None:
        args["per_device_eval_batch_size"] = t.per_device_eval_batch_size
    if t.neftune_noise_alpha is not None:
        args["neftune_noise_alpha"] = t.neftune_noise_alpha
    if t.precision in ("bf16", "auto") and spec.model.dtype == "bfloat16":
        args["pure_bf16"] = True
    elif t.precision in ("bf16", "auto"):
        args["bf16"] = True
    elif t.precision == "fp16":
        args["fp16"] = True
    else:  # fp32: said, not left to the reader to know LF's defaults
        args.update(bf16=False, fp16=False)
    if t.gradient_checkpointing != "auto":  # auto has no LF key: LF would checkpoint, Studio decides at launch
        args["disable_gradient_checkpointing"] = t.gradient_checkpointing == "off"
    if t.liger_kernel != "auto":  # auto has no LF key (LF's default is off; Studio decides per run)
        args["enable_liger_kernel"] = t.liger_kernel == "on"
    args.update(
        {
            "seed": t.seed,
            "report_to": ",".join(o.report_to),
        }
    )
    if t.resume_from:
        args["resume_from_checkpoint"] = t.resume_from
    _direct_out(spec, args)
    args.update(t.extra_args)  # LF passes TrainingArguments through, as Studio does
    return args, _accelerate_out(spec)


def _ray_out(spec: RunSpec) -> dict[str, Any]:
    """launch.ray as LF's Ray keys; the resources always written (LF's default is one GPU per worker, Studio's one
    GPU or one CPU by launch.device)."""
    ray = spec.launch.ray
    out: dict[str, Any] = {
        "ray_num_workers": ray.num_workers,
        "resources_per_worker": dict(ray.resources_per_worker)
        or ({"CPU": 1} if spec.launch.device == "cpu" else {"GPU": 1}),
        "placement_strategy": ray.placement_strategy,
    }
    if ray.init_kwargs:
        out["ray_init_kwargs"] = dict(ray.init_kwargs)
    if ray.storage_path:
        out["ray_storage_path"] = ray.storage_path
    if ray.run_name:
        out["ray_run_name"] = ray.run_name
    return out


def _optimizer_out(t) -> dict[str, Any]:
    """train.optimizer as LF writes it: its use_* switch (GaLore's flavour in optim), GaLore / APOLLO options."""
    switch = {v: k for k, v in _OPTIMIZER_SWITCHES.items()}
    galore = {v: k for k, v in _GALORE_BY_OPTIM.items() if k in ("adamw_torch", "adamw_8bit", "adafactor")}
    if t.optimizer in galore:
        out: dict[str, Any] = {"use_galore": True, "optim": galore[t.optimizer]}
        prefix = "galore_"
    elif t.optimizer in switch:
        out = {switch[t.optimizer]: True, "optim": "adamw_torch"}
        prefix = "apollo_" if t.optimizer == "apollo_adamw" else ""
    else:
        return {}
    if prefix:
        lr = t.low_rank
        for key, field in _LOW_RANK_KEYS.items():
            value = getattr(lr, field)
            out[prefix + key] = ",".join(value) if key == "target" else value
        if out[prefix + "scale"] is None:
            del out[prefix + "scale"]  # LF's default (2 for GaLore, 32 for APOLLO) is Studio's empty scale
        if prefix == "apollo_":
            out.update(apollo_proj=lr.apollo_proj, apollo_scale_type=lr.apollo_scale_type)
    if t.optimizer == "badam":
        b = t.badam
        out.update(
            badam_mode=b.mode,
            badam_switch_mode=b.switch_mode,
            badam_switch_interval=b.switch_interval,
            badam_update_ratio=b.update_ratio,
            badam_mask_mode=b.mask_mode,
            badam_verbose=b.verbose,
        )
        if b.start_block is not None:
            out["badam_start_block"] = b.start_block
    return out


def _direct_out(spec: RunSpec, args: dict) -> None:
    """Every other pass-through key of the table (``_DIRECT``) whose field differs from Studio's default: a mapping
    added to engine.lf.keys is written without a change here."""
    data, default = spec_to_dict(spec), _default_dict(spec)
    for key, path in _DIRECT.items():
        if key in args:
            continue
        value, base = _at(data, path), _at(default, path)
        if value is not _NONE and value is not None and value != base:
            args[key] = value


_NONE = object()


def _at(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return _NONE
        data = data[part]
    return data


def _default_dict(spec: RunSpec) -> dict:
    """Studio's defaults for a spec on this model and these datasets (the fields every spec must name)."""
    try:
        return spec_to_dict(
            RunSpec.model_validate(
                {"model": {"name_or_path": spec.model.name_or_path}, "data": {"datasets": list(spec.data.datasets)}}
            )
        )
    except Exception:  # noqa: BLE001 - no defaults: every field counts as set
        return {}


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def lf_lost_fields(spec: RunSpec, args: dict, acc: dict | None) -> dict[str, Any]:
    """The spec's fields that LLaMA-Factory YAML (+ ``acc``) cannot carry: read back, they come out different.
    {path: the spec's value}. A relative output folder written absolute is the same folder, not a loss."""
    imp = _lf_import(args, acc, None)
    try:
        back = spec_to_dict(RunSpec.model_validate(imp.data))
    except Exception:  # noqa: BLE001 - compare with what was read, as far as it goes
        back = imp.data
    want, got = _leaves(spec_to_dict(spec)), _leaves(back)
    lost = {p: v for p, v in want.items() if got.get(p, _NONE) != v}
    out_dir = spec.output.output_dir
    if out_dir and got.get("output.output_dir") == str(workspace_path(out_dir)):
        lost.pop("output.output_dir", None)
    lost.pop("schema_version", None)
    lost.pop("output.layout", None)  # LF has one layout: a run of the file saves in output_dir itself
    return lost


def needs_accelerate_config(spec: RunSpec) -> bool:
    """A launch LLaMA-Factory starts with an accelerate config (several processes or machines, DeepSpeed, FSDP,
    chosen GPUs): anything but the default launch, and never a Ray launch (LF's Ray launcher takes its ray keys)."""
    return spec.launch.target != "ray" and spec_to_dict(spec).get("launch") != _default_dict(spec).get("launch")


def spec_to_lf_text(spec: RunSpec, *, no_template: bool = False, header: list = ()) -> tuple[str, str | None]:
    """The LLaMA-Factory training YAML of a spec, with the fields it has no key for listed as comments at the end,
    and its accelerate config YAML (None when the launch is the default one). ``no_template``: no template key (LF
    then parses the tokenizer's own chat template); ``header``: lines written as comments at the top (what
    engine.commands.export_lf resolved)."""
    args, acc = spec_to_lf(spec)
    if no_template:
        args.pop("template", None)
    with_acc = needs_accelerate_config(spec)
    lost = lf_lost_fields(spec, args, acc if with_acc else None)
    text = "# LLaMA-Factory training YAML written by Studio\n"
    if spec.launch.target == "ray":
        header = [*header, "run with USE_RAY=1 (LLaMA-Factory's Ray launcher, launch.target: ray)"]
    text += "".join(f"# {line}\n" for line in header)
    text += yaml.safe_dump(args, sort_keys=False, allow_unicode=True)
    if lost:
        text += "\n# Studio settings LLaMA-Factory has no key for (a run of this file does without them):\n" + "".join(
            f"#   {path}: {json.dumps(value, ensure_ascii=False)}\n" for path, value in lost.items()
        )
    return text, (yaml.safe_dump(acc, sort_keys=False, allow_unicode=True) if with_acc else None)
