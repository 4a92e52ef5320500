"""LLaMA-Factory's prediction and evaluation YAMLs as evaluation specs: a training YAML with ``do_predict: true``
(and ``predict_with_generate: true``: LF's ``examples/extras/nlg_eval``), or ``do_eval: true`` without ``do_train``,
becomes an ``EvalSpec`` that writes what LF writes in its ``output_dir`` (``generated_predictions.jsonl``,
``predict_results.json`` / ``eval_results.json``, ``all_results.json``). Light: yaml, engine.lf, engine.eval.

The model, the dataset folder, the template, cutoff_len and output_dir are read by the training import
(``engine.lf.to_spec``), so paths resolve as they do for ``studio train``; the keys of prediction are read here:
model_name_or_path + adapter_name_or_path (one adapter), eval_dataset (else dataset), max_samples (per dataset),
per_device_eval_batch_size, and LF's generating arguments with LF's defaults (do_sample true, temperature 0.95,
top_p 0.7, top_k 50, max_new_tokens 1024). ``predict_with_generate`` scores BLEU-4 and ROUGE as LF's
ComputeSimilarity does; without it the loss is computed (``predict_loss`` / ``eval_loss``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.core import workspace
from engine.eval.messages import EvalError, message

# keys this module reads (the training import never sees them)
_OWN = {
    "do_predict",
    "do_eval",
    "do_train",
    "predict_with_generate",
    "adapter_name_or_path",
    "per_device_eval_batch_size",
    "max_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "do_sample",
    "max_samples",
    "eval_dataset",
    "dataset",
    "num_beams",
    "repetition_penalty",
    "length_penalty",
    "skip_special_tokens",
    "default_system",
}
_LF_GENERATION = {"do_sample": True, "temperature": 0.95, "top_p": 0.7, "top_k": 50, "max_new_tokens": 1024}


def is_prediction(data: Any) -> bool:
    """An LF YAML that predicts or evaluates and does not train."""
    from engine.lf.compat import is_lf_args

    if not isinstance(data, dict) or not is_lf_args(data) or data.get("do_train"):
        return False
    return bool(data.get("do_predict") or data.get("do_eval"))


def _csv(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [s.strip() for s in str(value or "").split(",") if s.strip()]


def to_eval_spec(data: dict, base_dir: Path | None = None) -> tuple[dict, list[str]]:
    """(evaluation spec as a dict, notes). EvalError naming every LF key refused, before anything runs."""
    from engine.lf.to_spec import _lf_import

    rest = {k: v for k, v in data.items() if k not in _OWN}
    imp = _lf_import(rest, None, base_dir)
    problems = [(k, str(why)) for k, why in {**imp.unsupported, **imp.missing}.items()]
    notes = [str(n) for n in imp.notes if not str(n).startswith("gradient_checkpointing")]  # training's only
    d = imp.data
    stage = d.get("method", {}).get("stage", "sft")
    if stage != "sft":
        problems.append(("stage", f"prediction is for stage sft (this YAML has {stage})"))
    model = d.get("model", {}).get("name_or_path")
    if not model:
        problems.append(("model_name_or_path", str(message("eval.lf_no_model"))))
    adapters = _csv(data.get("adapter_name_or_path"))
    if len(adapters) > 1:
        problems.append(("adapter_name_or_path", "several adapters: merge all but the last first (studio merge)"))
    resolved = []
    for a in adapters:
        path = Path(a).expanduser()
        if not path.is_absolute():
            here = Path.cwd() / path
            path = here if here.exists() or base_dir is None else base_dir / path
        resolved.append(str(path))
    datasets = _csv(data.get("eval_dataset")) or _csv(data.get("dataset"))
    if not datasets:
        problems.append(("eval_dataset", str(message("eval.lf_no_dataset"))))
    for key in ("num_beams", "repetition_penalty", "length_penalty"):
        if key in data and data[key] not in (1, 1.0, None):
            problems.append((key, "not supported by Studio's evaluation: leave it at 1"))
    if problems:
        raise EvalError([(k, message("eval.lf_refused", key=k, why=why)) for k, why in problems])
    gen = {k: data.get(k, v) for k, v in _LF_GENERATION.items()}
    sampled = bool(gen["do_sample"]) and float(gen["temperature"] or 0) > 0
    generate = bool(data.get("predict_with_generate"))
    out = d.get("output", {}).get("output_dir") or str(workspace.home() / "trainer_output")
    spec = {
        "name": f"LF {'predict' if data.get('do_predict') else 'eval'} {Path(out).name}",
        "models": {"base_model": model, "adapters": resolved, "final": False, "base": not resolved},
        "data": {
            "source": "dataset",
            "datasets": datasets,
            "dataset_dir": d.get("data", {}).get("dataset_dir"),
            "max_samples": data.get("max_samples"),
            "cutoff_len": d.get("data", {}).get("cutoff_len"),
        },
        "measures": ["bleu", "rouge"] if generate else ["loss"],
        "generation": {
            "max_new_tokens": int(gen["max_new_tokens"]),
            "temperature": float(gen["temperature"]) if sampled else 0.0,
            "top_p": float(gen["top_p"]) if sampled else 1.0,
            "top_k": int(gen["top_k"] or 0) if sampled else 0,
            "batch_size": int(data.get("per_device_eval_batch_size") or 8),
            "seed": int(data.get("seed", 42)),
        },
        "template": d.get("data", {}).get("template") or "auto",
        "lf_output_dir": out,
        "lf_prefix": "predict" if data.get("do_predict") else "eval",
    }
    return spec, notes
