"""LLaMA-Factory's export YAML (``llamafactory-cli export``) in: the options of a Studio merge.

Light: engine.lf.keys / messages and engine.spec.hf_args only (never torch; engine.machine.hardware and
engine.models.resolve inside the functions that need them). ``lf_export_to_merge`` is read by ``studio merge
--lf-yaml`` (engine.export.jobs); the merge itself is engine.export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.lf.keys import (
    _CONVERTED,
    _DIRECT,
    _EXPORT_KEYS,
    _EXPORT_QUANT_OPTIONS,
    _FEATURES,
    _HF4_REMOVED,
    _NOTED,
    _OPTIONS_OF_OFF_FEATURES,
    _csv,
    _Import,
    _lf_path,
    _looked,
    _truthy,
)
from engine.lf.messages import message
from engine.spec.hf_args import HF_TRAINING_ARGS


def lf_export_to_merge(args: Any, base_dir: str | Path | None = None) -> _Import:
    """A LLaMA-Factory export YAML (``llamafactory-cli export``) as the options of a Studio merge.

    ``imp.data``: ``base`` (the model folder), ``adapters`` (folders, in order; may be empty: a full model is
    re-exported), ``out_dir``, ``max_shard_size`` (export_size GB), ``device`` (cpu / cuda), ``legacy_format``
    (.bin instead of safetensors) and ``push_to_hub`` (export_hub_model_id or None). ``imp.unsupported`` names each
    key refused, with why; ``imp.notes`` one line per key accepted that changes nothing; ``imp.missing`` the
    adapters found nowhere (by key ``adapter_name_or_path[i]``: a Studio run id is looked up by the caller). Paths
    resolve as LF resolves them: the working directory first, then the YAML's folder (``base_dir``).
    """
    imp = _Import()
    base = Path(base_dir) if base_dir is not None else None
    if not isinstance(args, dict):
        imp.bad("export_yaml", message("lf.export_not_mapping"))
        return imp
    a = {**_EXPORT_KEYS, **args}
    for key in args:
        if key in _EXPORT_KEYS or key in _EXPORT_QUANT_OPTIONS:
            continue
        known = (_DIRECT, _CONVERTED, _NOTED, _FEATURES, _HF4_REMOVED, _OPTIONS_OF_OFF_FEATURES, HF_TRAINING_ARGS)
        if any(key in table for table in known):
            imp.notes.append(message("lf.export_training_key", key=key))
        else:
            imp.bad(key, message("lf.export_unknown_key"))
    if a["export_quantization_bit"] is not None:
        imp.bad("export_quantization_bit", message("lf.export_gptq"))
    if a["quantization_bit"] is not None:
        imp.bad("quantization_bit", message("lf.export_quantized"))
    finetuning = str(a["finetuning_type"] or "lora")
    adapters = _csv(a["adapter_name_or_path"]) if a["adapter_name_or_path"] else []
    if finetuning not in ("lora", "full", "freeze"):
        imp.bad("finetuning_type", message("lf.export_finetuning", finetuning=finetuning))
    elif adapters and finetuning != "lora":
        imp.bad("adapter_name_or_path", message("lf.export_adapters_need_lora", finetuning=finetuning))
    if _truthy(a["trust_remote_code"]):
        imp.notes.append(message("lf.export_trust_remote_code"))
    if a["template"]:
        imp.notes.append(message("lf.export_template", template=a["template"]))
    model = a["model_name_or_path"]
    if not model:
        imp.bad("model_name_or_path", message("lf.export_no_model"))
    else:
        imp.data["base"] = _export_model(str(model), base, imp)
    imp.data["adapters"] = []
    for i, name in enumerate(adapters):
        found, looked = _lf_path(name, base)
        if found is None:
            imp.missing[f"adapter_name_or_path[{i}]"] = message(
                "lf.export_adapter_missing", name=name, looked=_looked(looked)
            )
        imp.data["adapters"].append(str(found) if found is not None else name)
    if not a["export_dir"]:
        imp.bad("export_dir", message("lf.export_no_dir"))
    else:
        out, _ = _lf_path(a["export_dir"], None, must_exist=False)  # LF writes under the working directory
        imp.data["out_dir"] = str(out)
    size = a["export_size"]
    if isinstance(size, bool) or not isinstance(size, (int, float)) or not size > 0:
        imp.bad("export_size", message("lf.export_size", value=size))
    else:
        imp.data["max_shard_size"] = f"{size:g}GB"
    device = str(a["export_device"]).lower()
    if device not in ("cpu", "auto"):
        imp.bad("export_device", message("lf.export_device", value=a["export_device"]))
    elif device == "auto":
        from engine.machine import hardware

        gpus = hardware.detect().gpus
        imp.data["device"] = "cuda" if gpus else "cpu"
        if not gpus:
            imp.notes.append(message("lf.export_device_cpu"))
    else:
        imp.data["device"] = "cpu"
    legacy = a["export_legacy_format"]
    if not isinstance(legacy, bool):
        imp.bad("export_legacy_format", message("lf.export_legacy", value=legacy))
    imp.data["legacy_format"] = legacy is True
    imp.data["push_to_hub"] = str(a["export_hub_model_id"]) if a["export_hub_model_id"] else None
    return imp


def _export_model(name: str, base_dir: Path | None, imp: _Import) -> str:
    """The base model's folder: a path as LF resolves it, else a hub id's snapshot in the Hugging Face cache."""
    found, looked = _lf_path(name, base_dir)
    if found is not None:
        if not (found / "config.json").is_file():
            imp.bad("model_name_or_path", message("lf.export_no_config", path=found))
        return str(found)
    from engine.models.resolve import from_cache, is_hub_id, split_revision

    repo, rev = split_revision(name)
    if is_hub_id(repo):
        _, hit = from_cache(repo, rev)
        if hit:
            return str(Path(hit).parent)
    imp.bad("model_name_or_path", message("lf.export_model_missing", name=name, looked=_looked(looked)))
    return name
