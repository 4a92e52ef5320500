"""LLaMA-Factory's export YAML (``llamafactory-cli export``) in: the options of a Studio merge.

Light: engine.lf.keys / messages and engine.spec.hf_args only (never torch; engine.machine.hardware and
engine.models.resolve inside the functions that need them). ``lf_export_to_merge`` is read by ``studio merge
--lf-yaml`` (engine.export.merge_jobs); the merge itself is engine.export.
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
    imp.data["quantize"] = None
    if a["export_quantization_bit"] is not None:
        imp.data["quantize"] = _quantize(args, adapters, base, imp)
    return imp


def _quantize(args: dict, adapters: list[str], base_dir: Path | None, imp: _Import) -> dict | None:
    """GPTQ at export (``export_quantization_bit``), as LLaMA-Factory does it: the model of ``model_name_or_path``
    (no adapters: LF asks to merge them first), calibrated on ``export_quantization_dataset`` (a file of ``text``
    rows; LF needs one too), ``export_quantization_nsamples`` windows of ``export_quantization_maxlen`` tokens. Studio
    runs it as ``studio export MODEL --format gptq-<bits>bit --calibration FILE``. The options, or None (refused)."""
    bits = args["export_quantization_bit"]
    if isinstance(bits, bool) or bits not in (4, 8):
        imp.bad("export_quantization_bit", message("lf.export_gptq_bits", value=bits))
    if adapters:
        imp.bad("adapter_name_or_path", message("lf.export_gptq_adapters"))
    counts = {}
    for key, default in (("export_quantization_nsamples", 128), ("export_quantization_maxlen", 1024)):
        value = args.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            imp.bad(key, message("lf.export_gptq_count", value=value))
        counts[key] = value
    dataset, found = args.get("export_quantization_dataset"), None
    if not dataset:
        imp.bad("export_quantization_dataset", message("lf.export_gptq_no_dataset"))
    else:
        found, looked = _lf_path(dataset, base_dir)
        if found is None or not found.is_file():
            imp.bad(
                "export_quantization_dataset",
                message("lf.export_gptq_dataset", name=dataset, looked=_looked(looked)),
            )
    if args.get("export_legacy_format") is True:
        imp.notes.append(message("lf.export_gptq_legacy"))
    if "export_size" in args:
        imp.notes.append(message("lf.export_gptq_size"))
    if found is None or any(k in imp.unsupported for k in ("export_quantization_bit", *counts)):
        return None
    return {
        "format": f"gptq-{bits}bit",
        "calibration": str(found),
        "samples": counts["export_quantization_nsamples"],
        "maxlen": counts["export_quantization_maxlen"],
    }


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
