"""What merge, export, serving and Chat take weights from: a run (its id or folder) or an adapter folder, read into
a ``Source`` with its base model, quantization and adapter config, or an ``ExportError`` that says what is missing.

The folders are found by ``engine.core.weights.find``, the one walk over a run's final weights that the GRPO reward
model rule uses too; this module adds what export needs on top: a run id as the registry knows it, the adapter's
files and its base model on disk, and export's messages. Light: stdlib, yaml and engine's light modules only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.core import events as ev
from engine.core import weights
from engine.export.messages import ExportError, message
from engine.runs import owners


@dataclass
class Source:
    given: str
    kind: str  # "adapter" or "model" (a full / freeze fine-tune's weights)
    weights_dir: str
    run_dir: str | None = None
    spec: dict | None = None
    base: str | None = None
    quant_bits: int = 0
    adapter_config: dict = field(default_factory=dict)


def resolve_source(path: str | Path, base: str | None = None) -> Source:
    """Classify one source folder (or a run id, as ``studio runs`` lists them), or raise ExportError saying what is
    missing. ``base``: the model folder an adapter is merged into, in place of the one it names."""
    given = str(path)
    p = Path(path).expanduser().resolve()
    if not p.exists() and (run_folder := run_id_folder(given)) is not None:
        p = run_folder
    if not p.exists():
        raise ExportError(message("export.no_source", path=path))
    if (problem := owners.path_problem(p, field="source")) is not None:  # team mode: another member's run
        raise ExportError(problem)
    if not p.is_dir():
        raise ExportError(message("export.is_file", path=path))
    try:
        found = weights.find(str(p))
    except weights.WeightsNotFound as exc:
        raise ExportError(_not_found(exc)) from None
    if found.kind == "adapter":
        return _adapter_source(given, found.folder, found.run_dir, found.spec, base)
    if found.run_dir is None:  # a model folder of its own is a base, not something to merge
        raise ExportError(message("export.full_model_folder", path=p))
    return Source(given, "model", str(found.folder), str(found.run_dir), found.spec, base=str(found.folder))


def _not_found(exc: weights.WeightsNotFound):
    if exc.reason == "spec_unreadable":
        return message("export.spec_unreadable", path=exc.path, error=exc.detail)
    if exc.reason != "unfinished":
        return message("export.not_adapter", path=exc.path)
    run_dir, spec = exc.path, exc.spec or {}
    adir, mdir = weights.run_weight_dirs(run_dir, spec)
    last = ev.last_event(run_dir / "events.jsonl", ev.TERMINAL_TYPES)
    state = message(f"export.run_{last['type']}" if last else "export.run_unfinished")
    what = "adapter" if (spec.get("method") or {}).get("finetuning", "lora") in ("lora", "oft") else "model"
    wanted = adir if what == "adapter" else mdir
    return message(f"export.run_no_{what}", run=run_dir, wanted=wanted, state=state)


def run_id_folder(given: str) -> Path | None:
    """The folder of the run with id ``given`` as the caller may see it (the registry's, else the workspace's
    runs/<id>: ``engine.runs.owners.run_folder``), or None; a member's, in team mode, only among their own runs."""
    folder = owners.run_folder(given)
    return folder if folder is not None and (folder / "spec.yaml").is_file() else None


def _adapter_source(
    given: str, adir: Path, run_dir: Path | None, spec: dict | None, base_override: str | None = None
) -> Source:
    try:
        cfg = json.loads((adir / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(
            message("export.adapter_config_bad_json", path=adir / "adapter_config.json", error=exc)
        ) from None
    if not any((adir / n).is_file() for n in ("adapter_model.safetensors", "adapter_model.bin")):
        raise ExportError(message("export.adapter_not_saved", path=adir))
    base = base_override or cfg.get("base_model_name_or_path") or ((spec or {}).get("model") or {}).get("name_or_path")
    if not base:
        raise ExportError(message("export.no_base_name", path=adir / "adapter_config.json"))
    bpath = Path(base).expanduser()
    if not bpath.is_absolute() and (adir / bpath).is_dir():
        bpath = adir / bpath
    if not (bpath / "config.json").is_file():
        raise ExportError(message("export.base_not_local", base=base, adapter=adir))
    bits = int(((spec or {}).get("method") or {}).get("quantization", {}).get("bits", 0) or 0)
    if not bits and isinstance(cfg.get("quantization_config"), dict):  # some trainers record it in the adapter
        bits = 4 if cfg["quantization_config"].get("load_in_4bit") else 8
    return Source(
        given, "adapter", str(adir), str(run_dir) if run_dir else None, spec, str(bpath.resolve()), bits, cfg
    )


def source_head(src: Source) -> str:
    """What the source's weights are: "seq_cls" for a reward model (stage rm: an adapter of peft task type SEQ_CLS,
    or weights saved as a ...ForSequenceClassification), else "causal_lm"."""
    if src.kind == "adapter":
        return weights.adapter_head(src.adapter_config)
    return weights.model_head(Path(src.weights_dir))
