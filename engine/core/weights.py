"""Where a run's trained weights are and what they are, read from files only: the folders a run saves its final
adapter or model in (from its ``spec.yaml``), and whether weights are a reward model (stage rm: a sequence classifier,
"seq_cls") or a causal LM.

Light: stdlib + yaml. ``engine.export.sources`` (merge, export, serve, Chat) and the spec's GRPO rules (a reward model
from a Studio rm run, ``engine.spec.grpo_group``) read runs through these functions, so a run's weights are found the
same way everywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from engine.core import workspace


def read_json(path: Path) -> dict:
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def run_weight_dirs(run_dir: Path, spec: dict) -> tuple[Path, Path]:
    """(adapter folder, model folder) where the run saves its final weights: its output folder's ``adapter/`` and
    ``model/``, or the output folder itself for LLaMA-Factory's layout (``output.layout: llamafactory``)."""
    output = spec.get("output") or {}
    out = Path(str(output.get("output_dir") or run_dir)).expanduser()
    if output.get("layout") == "llamafactory":
        return out, out
    return out / "adapter", out / "model"


def adapter_head(adapter_config: dict) -> str:
    """An adapter's head: "seq_cls" when peft saved it for sequence classification (stage rm), else "causal_lm"."""
    return "seq_cls" if str(adapter_config.get("task_type") or "").upper() == "SEQ_CLS" else "causal_lm"


def model_head(model_dir: Path) -> str:
    """A model folder's head: "seq_cls" when its config names a ...ForSequenceClassification, else "causal_lm"."""
    archs = read_json(Path(model_dir) / "config.json").get("architectures") or []
    return "seq_cls" if any(str(a).endswith("ForSequenceClassification") for a in archs) else "causal_lm"


@dataclass
class Weights:
    """Trained weights found from what a user gave: ``kind`` "adapter" or "model", their folder, the run's folder and
    spec when they came from a run."""

    kind: str
    folder: Path
    head: str
    run_dir: Path | None = None
    spec: dict | None = None

    @property
    def base(self) -> str:
        """An adapter's base model: the one its adapter_config.json names, else its run's spec's; "" for a model."""
        if self.kind != "adapter":
            return ""
        named = read_json(self.folder / "adapter_config.json").get("base_model_name_or_path")
        return str(named or ((self.spec or {}).get("model") or {}).get("name_or_path") or "")


class WeightsNotFound(ValueError):
    """Why no weights were found: ``reason`` is "missing", "spec_unreadable", "not_weights" or "unfinished"."""

    def __init__(self, reason: str, path: Path, detail: str = "", spec: dict | None = None):
        super().__init__(f"{reason}: {path} {detail}".strip())
        self.reason, self.path, self.detail = reason, path, detail
        self.spec = spec  # an unfinished run's spec: what it was to save


def run_folder(given: str) -> Path | None:
    """The workspace folder of the run with id ``given`` (``runs/<id>`` holding a spec.yaml), or None."""
    if not given or "/" in given or given.startswith((".", "~")):
        return None
    folder = workspace.runs_dir() / given
    return folder if (folder / "spec.yaml").is_file() else None


def find(given: str) -> Weights:
    """The weights behind ``given``: a run id, a run's folder (its final adapter or model), an adapter folder (or a
    folder holding ``adapter/``) or a model folder. Relative paths are taken from the workspace. Raises
    ``WeightsNotFound``."""
    p = Path(given).expanduser()
    if not p.is_absolute() and not p.exists():
        p = workspace.home() / p
    if not p.exists() and (folder := run_folder(given)) is not None:
        p = folder
    if not p.is_dir():
        raise WeightsNotFound("missing", p)
    if (p / "spec.yaml").is_file():
        try:
            spec = yaml.safe_load((p / "spec.yaml").read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise WeightsNotFound("spec_unreadable", p / "spec.yaml", str(exc)) from None
        adir, mdir = run_weight_dirs(p, spec)
        if (adir / "adapter_config.json").is_file():
            return Weights("adapter", adir, adapter_head(read_json(adir / "adapter_config.json")), p, spec)
        if (mdir / "config.json").is_file():
            return Weights("model", mdir, model_head(mdir), p, spec)
        raise WeightsNotFound("unfinished", p, spec=spec)
    for cand in (p, p / "adapter"):
        if (cand / "adapter_config.json").is_file():
            return Weights("adapter", cand, adapter_head(read_json(cand / "adapter_config.json")))
    if (p / "config.json").is_file():
        return Weights("model", p, model_head(p))
    raise WeightsNotFound("not_weights", p)
