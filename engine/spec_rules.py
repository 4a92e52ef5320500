"""The run spec's rules beyond single fields: cross-field errors, warnings for legal but unwise settings, and
context rules that read files (the model's ``config.json``, the dataset registry and its rows).

Light: stdlib only (engine.dataset_registry and engine.workspace are imported where used). Every rule returns
(field path, message) pairs whose message says what to do; ``engine.spec`` turns them into errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.spec import RunSpec

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


def cross_field_errors(spec: RunSpec) -> list[tuple[str, str]]:
    """Rules between fields that need no files. Each is (field path, message with the fix)."""
    m, t, ln, d = spec.method, spec.train, spec.launch, spec.data
    errors: list[tuple[str, str]] = []
    if m.quantization.bits and m.finetuning != "lora":
        errors.append(
            (
                "method.quantization.bits",
                f"{m.quantization.bits}-bit quantization trains only adapters: set "
                "method.finetuning to lora (QLoRA), or quantization bits to 0",
            )
        )
    if m.lora.use_dora and m.quantization.bits == 8:
        errors.append(("method.lora.use_dora", "DoRA is not supported on 8-bit weights: use 4-bit or no quantization"))
    if ln.backend == "deepspeed":
        ds = ln.deepspeed
        if ds.offload_optimizer != "none" and ds.zero_stage < 1:
            errors.append(
                (
                    "launch.deepspeed.offload_optimizer",
                    "optimizer offload needs ZeRO stage 1, 2 or 3: raise launch.deepspeed.zero_stage",
                )
            )
        if ds.offload_param != "none" and ds.zero_stage != 3:
            errors.append(
                (
                    "launch.deepspeed.offload_param",
                    "parameter offload needs ZeRO stage 3: set "
                    "launch.deepspeed.zero_stage to 3 or offload_param to none",
                )
            )
        if "nvme" in (ds.offload_optimizer, ds.offload_param) and not ds.nvme_path:
            errors.append(
                ("launch.deepspeed.nvme_path", "NVMe offload needs a folder: set launch.deepspeed.nvme_path")
            )
        # QLoRA 4-bit shards under ZeRO-3 (the seed's worked example) with bf16/fp16 4-bit storage; 8-bit cannot.
        if m.quantization.bits == 8 and ds.zero_stage == 3:
            errors.append(
                (
                    "method.quantization.bits",
                    "8-bit bitsandbytes weights cannot be sharded by ZeRO-3: use "
                    "4-bit (QLoRA), ZeRO stage 0-2, or quantization bits 0",
                )
            )
        if m.quantization.bits == 4 and ds.zero_stage == 3 and m.quantization.compute_dtype == "float32":
            errors.append(
                (
                    "method.quantization.compute_dtype",
                    "4-bit with ZeRO-3 needs bfloat16 or float16 storage: set compute_dtype to bfloat16",
                )
            )
    if ln.backend == "fsdp" and m.quantization.bits == 8:
        errors.append(
            (
                "method.quantization.bits",
                "FSDP cannot shard 8-bit bitsandbytes weights: use 4-bit (QLoRA with FSDP) or another backend",
            )
        )
    if ln.backend == "fsdp" and m.quantization.bits == 4 and m.quantization.compute_dtype == "float32":
        errors.append(
            (
                "method.quantization.compute_dtype",
                "4-bit with FSDP needs bfloat16 or float16 storage: set compute_dtype to bfloat16",
            )
        )
    if ln.backend == "single" and ln.num_processes > 1:
        errors.append(
            (
                "launch.num_processes",
                f"{ln.num_processes} processes need a distributed backend: set "
                "launch.backend to ddp, fsdp or deepspeed, or num_processes to 1",
            )
        )
    if ln.backend == "single" and ln.num_machines > 1:
        errors.append(("launch.num_machines", "several machines need a distributed backend (ddp, fsdp, deepspeed)"))
    if ln.gpus is not None:
        if len(set(ln.gpus)) != len(ln.gpus) or any(g < 0 for g in ln.gpus):
            errors.append(("launch.gpus", "GPU ids must be distinct and ≥ 0"))
        elif ln.num_processes > len(ln.gpus):
            errors.append(
                (
                    "launch.num_processes",
                    f"{ln.num_processes} processes per machine but only "
                    f"{len(ln.gpus)} GPU(s) chosen in launch.gpus: choose more GPUs or fewer processes",
                )
            )
        if ln.device == "cpu" and ln.gpus:
            errors.append(("launch.gpus", "GPUs chosen but launch.device is cpu: clear launch.gpus or use auto/cuda"))
    if ln.num_machines > 1:
        if not ln.main_process_ip.strip():
            errors.append(
                (
                    "launch.main_process_ip",
                    f"{ln.num_machines} machines need the rank-0 machine's address in launch.main_process_ip",
                )
            )
    if ln.machine_rank >= ln.num_machines:
        errors.append(
            (
                "launch.machine_rank",
                f"machine rank {ln.machine_rank} must be below launch.num_machines ({ln.num_machines})",
            )
        )
    if ln.backend == "fsdp" and ln.device == "cpu":
        errors.append(("launch.backend", "FSDP needs GPUs: on CPU use ddp or deepspeed"))
    if t.precision == "fp16" and ln.device == "cpu":
        errors.append(("train.precision", "fp16 mixed precision needs a GPU: use bf16 or fp32 on CPU"))
    if d.mix_probs is not None:
        if len(d.mix_probs) != len(d.datasets):
            errors.append(
                (
                    "data.mix_probs",
                    f"{len(d.mix_probs)} probabilities for {len(d.datasets)} datasets: give one per dataset",
                )
            )
        elif not all(p >= 0 for p in d.mix_probs) or abs(sum(d.mix_probs) - 1.0) > 1e-6:  # `not all` also catches NaN
            errors.append(("data.mix_probs", "probabilities must be ≥ 0 and sum to 1"))
        if d.mix == "concat":
            errors.append(
                (
                    "data.mix_probs",
                    "probabilities apply to interleaving: set data.mix to interleave_under "
                    "or interleave_over, or clear data.mix_probs",
                )
            )
    if len(set(d.datasets)) != len(d.datasets):
        errors.append(("data.datasets", "a dataset is listed twice"))
    if d.packing and m.stage == "dpo":
        errors.append(("data.packing", "packing applies to sft and pt, not dpo: turn data.packing off"))
    if "none" in spec.output.report_to and len(spec.output.report_to) > 1:
        errors.append(("output.report_to", "'none' cannot be combined with other trackers"))
    if m.lora.targets and "all" in m.lora.targets and len(m.lora.targets) > 1:
        errors.append(
            ("method.lora.targets", "'all' already covers every linear layer: give 'all' alone or a list of names")
        )
    return errors


def spec_warnings(spec: RunSpec) -> list[tuple[str, str]]:
    """Legal but unwise combinations: shown, never blocking."""
    m, t, ln, d = spec.method, spec.train, spec.launch, spec.data
    warns: list[tuple[str, str]] = []
    if ln.backend == "deepspeed" and ln.deepspeed.offload_param != "none":
        warns.append(
            ("launch.deepspeed.offload_param", "parameter offload slows training a lot; try optimizer offload first")
        )
    if ln.backend in ("ddp", "fsdp", "deepspeed") and spec.world_size == 1:
        warns.append(("launch.backend", f"{ln.backend} with one process gains nothing over single"))
    if t.gradient_checkpointing and m.finetuning == "lora" and t.per_device_batch_size == 1 and d.cutoff_len <= 512:
        warns.append(
            ("train.gradient_checkpointing", "on short sequences checkpointing costs ~30% speed and saves little")
        )
    if t.learning_rate > 1e-3 and m.finetuning == "full":
        warns.append(
            ("train.learning_rate", f"{t.learning_rate:g} is high for full fine-tuning (typical: 1e-5 to 5e-5)")
        )
    if m.finetuning == "lora" and t.learning_rate < 1e-5:
        warns.append(("train.learning_rate", f"{t.learning_rate:g} is low for LoRA (typical: 1e-4 to 5e-4)"))
    if m.lora.alpha / max(m.lora.rank, 1) > 8 and m.finetuning == "lora":
        warns.append(("method.lora.alpha", "alpha/rank above 8 scales updates strongly; typical is 1-2"))
    if ln.backend == "single" and ln.device != "cpu" and ln.gpus and len(ln.gpus) > 1:
        warns.append(("launch.gpus", "single-process runs use one GPU; choose ddp, fsdp or deepspeed to use them all"))
    if d.val_size == 0 and t.eval_steps != 500:
        warns.append(("train.eval_steps", "no validation split (data.val_size is 0): eval_steps has no effect"))
    if ln.backend == "deepspeed" and t.optimizer in ("adamw_8bit", "paged_adamw_8bit"):
        warns.append(("train.optimizer", "DeepSpeed uses its own optimizer; the 8-bit optimizer is ignored"))
    if spec.model.trust_remote_code:
        warns.append(("model.trust_remote_code", "the model's own Python code will run: only for models you trust"))
    return warns


# ----------------------------------------------------------------------------------------------- context rules
def read_model_config(name_or_path: str) -> dict | None:
    """The model's config.json when it is a local folder, else None (hub ids are checked at load time)."""
    cfg = _user_path(name_or_path) / "config.json"
    if cfg.is_file():
        try:
            data = json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None
    return None


def _user_path(path: str) -> Path:
    """``~`` expanded; a ``~user`` that does not exist stays literal instead of raising RuntimeError."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)


def resolve_dataset_dir(spec: RunSpec) -> Path:
    if spec.data.dataset_dir:
        return _user_path(spec.data.dataset_dir)
    from engine import workspace

    return workspace.data_dir()


def check_context(spec: RunSpec) -> list[tuple[str, str]]:
    """Rules that read files: the model folder and its config, the dataset registry and columns."""
    errors: list[tuple[str, str]] = []
    mpath = _user_path(spec.model.name_or_path)
    looks_local = spec.model.name_or_path.startswith(("/", ".", "~")) or mpath.exists()
    if looks_local and not mpath.is_dir():
        errors.append(("model.name_or_path", f"no model folder at {spec.model.name_or_path}"))
    elif looks_local and not (mpath / "config.json").is_file():
        errors.append(
            ("model.name_or_path", f"{spec.model.name_or_path} has no config.json: not a transformers model folder")
        )
    cfg = read_model_config(spec.model.name_or_path)
    if cfg:
        max_pos = cfg.get("max_position_embeddings")
        factor = spec.model.rope_scaling.factor if spec.model.rope_scaling else 1.0
        if isinstance(max_pos, int) and spec.data.cutoff_len > max_pos * factor:
            errors.append(
                (
                    "data.cutoff_len",
                    f"{spec.data.cutoff_len} exceeds the model's maximum positions "
                    f"({max_pos}{' x ' + str(factor) if factor != 1 else ''}): lower data.cutoff_len or set "
                    "model.rope_scaling",
                )
            )
        known = ARCH_LINEAR_MODULES.get(str(cfg.get("model_type", "")))
        if known and spec.method.finetuning == "lora":
            bad = [t for t in spec.method.lora.targets if t != "all" and t not in known]
            if bad:
                errors.append(
                    (
                        "method.lora.targets",
                        f"{', '.join(bad)} name no module of a {cfg.get('model_type')} "
                        f"model; its linear modules are {', '.join(known)} (or 'all')",
                    )
                )
        if known and spec.method.finetuning == "freeze":
            bad = [t for t in spec.method.freeze.trainable_modules if t not in known and t not in _LAYER_PARTS]
            if bad:
                errors.append(
                    (
                        "method.freeze.trainable_modules",
                        f"{', '.join(bad)} name no module of a "
                        f"{cfg.get('model_type')} decoder layer; choose from {', '.join(known + _LAYER_PARTS)}",
                    )
                )
            layers = cfg.get("num_hidden_layers")
            if isinstance(layers, int) and spec.method.freeze.trainable_layers > layers:
                errors.append(
                    (
                        "method.freeze.trainable_layers",
                        f"{spec.method.freeze.trainable_layers} trainable layers but the model has {layers}",
                    )
                )
    want = spec.train.resume_from
    if want and want != "last" and not (_user_path(want) / "trainer_state.json").is_file():
        errors.append(
            (
                "train.resume_from",
                f"no checkpoint at {want} (a checkpoint folder holds trainer_state.json); "
                "give a checkpoint-N folder or 'last'",
            )
        )
    errors += _check_datasets(spec)
    return errors


_LAYER_PARTS = ["self_attn", "mlp", "input_layernorm", "post_attention_layernorm"]


def _check_datasets(spec: RunSpec) -> list[tuple[str, str]]:
    ddir = resolve_dataset_dir(spec)
    info_path = ddir / "dataset_info.json"
    if not info_path.is_file():
        return [("data.dataset_dir", f"no dataset_info.json in {ddir}")]
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [("data.dataset_dir", f"{info_path} is not valid JSON: {exc}")]
    if not isinstance(info, dict):
        return [("data.dataset_dir", f"{info_path} must map dataset names to entries, got {type(info).__name__}")]
    errors: list[tuple[str, str]] = []
    for name in spec.data.datasets:
        entry = info.get(name)
        if entry is None:
            errors.append(
                ("data.datasets", f"'{name}' is not in {info_path} (known: {', '.join(sorted(info)) or 'none'})")
            )
            continue
        if not isinstance(entry, dict):
            errors.append(("data.datasets", f"'{name}' in {info_path} is not an entry (a JSON object)"))
            continue
        ranking = bool(entry.get("ranking"))
        if spec.method.stage == "dpo" and not ranking:
            errors.append(
                (
                    "data.datasets",
                    f"dpo needs preference pairs, but '{name}' has no chosen/rejected columns "
                    '(set "ranking": true with chosen/rejected in dataset_info.json, or pick another dataset)',
                )
            )
        if spec.method.stage != "dpo" and ranking:
            errors.append(("data.datasets", f"'{name}' holds preference pairs: use stage dpo, or another dataset"))
    return errors
